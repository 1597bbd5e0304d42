import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { keys } from '@lanes/queue';
import { detectIsolation, type SandboxHandle, type SandboxProvider } from '@lanes/sandbox';
import { useRedis, waitFor } from '../harness/index.js';

describe('a burst on a lane below its maximum (issue 29)', () => {
  const f = useRedis();

  it('grows to every slot it may host when cards take its last free slot, without waiting for the next heartbeat', async () => {
    // A heartbeat far longer than the test: only the burst itself can start the growth.
    const t = await f.stack([{ name: 'burst', slots: 4, minSlots: 0, maxSlots: 4, agent: [process.execPath, DEMO_AGENT] }], {
      heartbeatIntervalMs: 120_000,
    });
    const cards = Array.from({ length: 12 }, (_, i) => ({ id: `burst-${i}`, lane: 'burst', title: 'burst', metadata: { sleepMs: 5_000 } }));
    const res = await t.api.request('POST', '/v1/cards', { cards });
    expect(res.status).toBe(202);
    const busy = await waitFor(
      'four slots running cards',
      async () => {
        const n = (await t.api.lanes())[0]!.slots.filter((s) => s.cardId !== undefined && s.sandbox?.state === 'live').length;
        return n >= 4 ? n : undefined;
      },
      { timeoutMs: 4_000 },
    );
    expect(busy).toBe(4);
  });
});

describe('a new sandbox’s first card', () => {
  const f = useRedis();

  it('goes to running as soon as the canary passed: the breaker’s reset, the live announcement and the card’s move go out together', async () => {
    const log: string[] = [];
    type Sendable = { sendCommand: (command: { name: string; args: unknown[]; promise: Promise<unknown> }, stream?: unknown) => unknown };
    const proto = Redis.prototype as unknown as Sendable;
    const sendCommand = proto.sendCommand;
    proto.sendCommand = function (this: Sendable, command, stream) {
      if (command.name === 'get' && String(command.args[0]) === keys.breaker('first')) {
        log.push('breaker read sent');
        void command.promise.then(
          () => log.push('breaker read answered'),
          () => undefined,
        );
      }
      // An event is appended by a script (lane-event-streams.ts): EVALSHA, or EVAL where Redis had not loaded it yet.
      if (['evalsha', 'eval'].includes(command.name) && command.args.some((a) => String(a).includes('"type":"sandbox.live"'))) log.push('sandbox.live sent');
      // The card write script's target state follows the sha, the key count and the keys.
      if (command.name === 'evalsha' && command.args[2 + Number(command.args[1])] === 'running') log.push('move to running sent');
      return sendCommand.call(this, command, stream);
    };
    try {
      const t = await f.stack([{ name: 'first', slots: 1, minSlots: 0, maxSlots: 1, agent: [process.execPath, DEMO_AGENT] }], { heartbeatIntervalMs: 120_000 });
      await t.api.request('POST', '/v1/cards', { id: 'first-1', lane: 'first', title: 'first card' });
      await t.api.waitCard('first-1', 'done', (c) => c.state === 'done');
    } finally {
      proto.sendCommand = sendCommand;
    }
    // The gate before the create reads the breaker too; the reset after the canary is the last read before the announcement.
    const live = log.indexOf('sandbox.live sent');
    expect(live).toBeGreaterThan(0);
    const reset = log.lastIndexOf('breaker read sent', live);
    expect(reset).toBeGreaterThanOrEqual(0);
    expect(log.slice(reset, live)).not.toContain('breaker read answered');
    const move = log.indexOf('move to running sent');
    expect(move).toBeGreaterThan(live);
    expect(log.slice(reset, move)).not.toContain('breaker read answered');
  });
});

/** Every exec's argv, by sandbox, of the sandboxes a provider makes. */
function recordingExecs(provider: SandboxProvider, execs: Map<string, string[][]>): SandboxProvider {
  const recorded = (handle: SandboxHandle): SandboxHandle =>
    new Proxy(handle, {
      get(target, prop) {
        if (prop === 'exec')
          return (argv: string[], options?: Parameters<SandboxHandle['exec']>[1]) => {
            execs.set(target.id, [...(execs.get(target.id) ?? []), argv]);
            return target.exec(argv, options);
          };
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  return new Proxy(provider, {
    get(target, prop) {
      if (prop === 'create') return async (...args: Parameters<SandboxProvider['create']>) => recorded(await target.create(...args));
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe.runIf(detectIsolation() === 'pid-namespace')('a new local sandbox’s canary (issue 29)', () => {
  const f = useRedis();
  /** An `echo` first on the PATH that fails the start canary's line alone, and is /bin/echo for anything else. */
  const bin = mkdtempSync(join(tmpdir(), 'lanes-start-canary-'));
  mkdirSync(join(bin, 'echo-dir'), { mode: 0o755 });
  writeFileSync(join(bin, 'echo-dir', 'echo'), `#!/bin/sh\ncase "$1" in *'"t":"canary"'*) exit 1 ;; esac\nexec /bin/echo "$@"\n`, { mode: 0o755 });
  afterAll(() => rmSync(bin, { recursive: true, force: true }));

  it('passed while the sandbox started: its first card’s first command is the agent; where it failed, the slot’s own canary runs first', async () => {
    const execs = new Map<string, string[][]>();
    const agent = [process.execPath, DEMO_AGENT];
    const shape = { slots: 1, minSlots: 0, maxSlots: 1, agent, isolation: 'pid-namespace' as const };
    const t = await f.stack(
      [
        { name: 'started', ...shape },
        { name: 'shadowed', ...shape, env: { PATH: `${join(bin, 'echo-dir')}:${process.env.PATH ?? '/usr/bin:/bin'}` } },
      ],
      { heartbeatIntervalMs: 120_000, wrap: (p) => recordingExecs(p, execs) },
    );
    await t.api.request('POST', '/v1/cards', {
      cards: [
        { id: 'sc-1', lane: 'started', title: 'first' },
        { id: 'sc-2', lane: 'shadowed', title: 'first' },
      ],
    });
    const started = await t.api.waitCard('sc-1', 'done', (c) => c.state === 'done');
    const shadowed = await t.api.waitCard('sc-2', 'done', (c) => c.state === 'done');
    expect(execs.get(started.sandboxId!)?.[0]).toEqual(agent);
    const [canary, first] = execs.get(shadowed.sandboxId!) ?? [];
    expect(canary?.[0]).toBe('echo');
    expect(canary?.[1]).toMatch(/^lanes-canary-/);
    expect(first).toEqual(agent);
  });
});
