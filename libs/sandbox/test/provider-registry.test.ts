import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLanesConfig } from '@lanes/contracts';
import { FaultyProvider, agentBaseEnv, createProviderRegistry, type SandboxHandle, type SandboxProvider } from '@lanes/sandbox';

const lanes = parseLanesConfig({
  lanes: [
    { name: 'plain', agent: ['true'] },
    { name: 'other', agent: ['true'] },
    { name: 'chaos', agent: ['true'], faults: { createFailures: 1 } },
  ],
}).lanes;

describe('agentBaseEnv', () => {
  it.each(['REDIS_URL', 'LANES_API_TOKENS', 'LANES_API_TOKEN', 'LANES_CONFIG', 'MODAL_TOKEN_ID', 'MODAL_TOKEN_SECRET', 'NODE_OPTIONS'])('drops %s', (key) => {
    expect(agentBaseEnv({ [key]: 'secret', PATH: '/bin' })).toEqual({ PATH: '/bin' });
  });
});

describe('provider registry', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lanes-registry-'));
  const saved = { REDIS_URL: process.env.REDIS_URL, LANES_API_TOKENS: process.env.LANES_API_TOKENS };
  let provider: SandboxProvider;
  let handle: SandboxHandle | undefined;

  beforeAll(() => {
    process.env.REDIS_URL = 'redis://:hunter2@example.invalid:6379';
    process.env.LANES_API_TOKENS = 'tok-1,tok-2';
  });
  afterAll(async () => {
    await handle?.terminate();
    await provider?.close();
    Object.assign(process.env, saved);
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
    rmSync(dir, { recursive: true, force: true });
  });

  it('shares one local provider across lanes, wraps faulty lanes, and reaps through the unwrapped one', () => {
    const registry = createProviderRegistry({ sandboxDir: dir, env: {} });
    provider = registry.forLane(lanes[0]!);
    expect(registry.forLane(lanes[1]!)).toBe(provider);
    const faulty = registry.forLane(lanes[2]!);
    expect(faulty).toBeInstanceOf(FaultyProvider);
    expect(registry.forLane(lanes[2]!)).toBe(faulty);
    expect(registry.all(lanes)).toEqual([provider]);
  });

  it('starts agents without the control plane credentials', async () => {
    handle = await provider.create({ image: 'local', tags: { lane: 'plain', slot: 's', worker: 'w' } });
    const { stdout, exitCode } = await handle.exec(['env']);
    expect(exitCode).toBe(0);
    expect(stdout).toContain('PATH=');
    expect(stdout).not.toContain('hunter2');
    expect(stdout).not.toContain('tok-1');
  });
});
