import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { startStack, type Stack, type StackOptions } from '@lanes/cli';
import { parseLanesConfig, type LaneConfigInput, type LaneConfig } from '@lanes/contracts';
import { createProviderRegistry, detectIsolation, type SandboxProvider } from '@lanes/sandbox';
import { apiClient, type ApiClient } from './api.js';

export interface TestStack {
  stack: Stack;
  api: ApiClient;
  lanes: LaneConfig[];
  sandboxDir: string;
  stop(): Promise<void>;
}

/** Test logs stay quiet unless LANES_TEST_LOG is set. */
export const testLog = () => pino({ level: process.env.LANES_TEST_LOG ?? 'silent' });

/**
 * A whole stack (API, worker, supervisor) on a test Redis with real local sandboxes in a temp dir.
 * `wrap` lets a test put a faulty provider around the local one.
 */
export async function startTestStack(
  redisUrl: string,
  lanes: LaneConfigInput[],
  options: Partial<StackOptions> & { wrap?: (provider: SandboxProvider, lane: LaneConfig) => SandboxProvider; sandboxDir?: string } = {},
): Promise<TestStack> {
  const sandboxDir = options.sandboxDir ?? mkdtempSync(join(tmpdir(), 'lanes-e2e-'));
  const log = testLog();
  // A local lane runs where its test's agent can run: the PID namespace (or a process group), the
  // isolation these suites were written for, unless the test asks for another (the hostile-agent
  // suite asks for separate-uid). `auto` would pick separate-uid on a root machine whose agent files
  // others can read, and not in a clone under a private directory: the same test must not change mode.
  const config = parseLanesConfig({ lanes: lanes.map((l) => (l.provider === 'modal' ? l : { isolation: detectIsolation(), ...l })) });
  const registry = await createProviderRegistry({ sandboxDir, env: process.env, log, lanes: config.lanes });
  const wrapped = new Map<string, SandboxProvider>();
  const providerFor = (lane: LaneConfig) => {
    let p = wrapped.get(lane.name);
    if (!p) {
      p = options.wrap ? options.wrap(registry.forLane(lane), lane) : registry.forLane(lane);
      wrapped.set(lane.name, p);
    }
    return p;
  };
  const { wrap: _wrap, sandboxDir: _dir, ...stackOptions } = options;
  const stack = await startStack({
    redisUrl,
    lanes: config.lanes,
    log,
    providerFor,
    isolationOf: (lane) => registry.isolation(lane),
    // As `lanes api` does: a process without a worker or supervisor builds no provider.
    // The supervisor lists and reaps through the same (wrapped) providers the workers create with.
    providers: options.parts?.worker === false && options.parts?.supervisor === false ? [] : [...new Set(config.lanes.map(providerFor))],
    port: 0,
    heartbeatIntervalMs: 500,
    ...stackOptions,
  });
  return {
    stack,
    api: apiClient(stack.url!),
    lanes: config.lanes,
    sandboxDir,
    async stop() {
      await stack.stop();
      // A directory the caller passed in is the caller's: other processes' sandboxes may live there.
      if (!options.sandboxDir) rmSync(sandboxDir, { recursive: true, force: true });
    },
  };
}

/**
 * An API alone (no worker, no supervisor, no provider) on `redisUrl`, as `lanes api` runs it, on a
 * port the caller chose so it can stop it and start it again there.
 */
export function startApiOnly(redisUrl: string, lanes: readonly LaneConfig[], port: number, options: Partial<StackOptions> = {}): Promise<Stack> {
  return startStack({
    redisUrl,
    lanes,
    log: testLog(),
    providerFor: () => {
      throw new Error('an API-only stack makes no sandbox');
    },
    providers: [],
    port,
    parts: { api: true, worker: false, supervisor: false },
    ...options,
  });
}
