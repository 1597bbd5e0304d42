import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProviderInvalidError, parseLanesConfig } from '@lanes/contracts';
import { LocalSandboxProvider, createProviderRegistry, detectIsolation, type SandboxHandle, type SandboxProvider } from '@lanes/sandbox';
import { FaultyProvider } from '@lanes/sandbox/testing';
import { agentBaseEnv } from '../src/agent-env.js';

const lanes = parseLanesConfig({
  lanes: [
    { name: 'plain', agent: ['true'] },
    { name: 'other', agent: ['true'] },
    { name: 'chaos', agent: ['true'], faults: { createFailures: 1 } },
  ],
}).lanes;

describe('agentBaseEnv: an allow-list, not a deny-list', () => {
  it.each([
    'REDIS_URL',
    'LANES_API_TOKENS',
    'LANES_CALLBACK_SECRET',
    'LANES_CALLBACK_SECRET_PREVIOUS',
    'LANES_CONFIG',
    'MODAL_TOKEN_ID',
    'MODAL_TOKEN_SECRET',
    'NODE_OPTIONS',
    'AWS_SECRET_ACCESS_KEY',
    'GITHUB_TOKEN',
    // The collector's credentials, and the worker's own trace: an agent's TRACEPARENT is its card's (card-env.ts in @lanes/runner).
    'OTEL_EXPORTER_OTLP_HEADERS',
    'TRACEPARENT',
    'ANYTHING_ELSE',
  ])('drops %s', (key) => {
    expect(agentBaseEnv({ [key]: 'secret', PATH: '/bin' })).toEqual({ PATH: '/bin' });
  });

  it('keeps what programs need to run', () => {
    const kept = { PATH: '/bin', HOME: '/h', USER: 'u', LOGNAME: 'u', SHELL: '/bin/sh', LANG: 'C.UTF-8', LC_ALL: 'C', TZ: 'UTC', TERM: 'xterm', TMPDIR: '/t' };
    expect(agentBaseEnv(kept)).toEqual(kept);
  });
});

describe('provider registry', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lanes-registry-'));
  const saved = { REDIS_URL: process.env.REDIS_URL, LANES_API_TOKENS: process.env.LANES_API_TOKENS, LANES_CALLBACK_SECRET: process.env.LANES_CALLBACK_SECRET };
  let provider: SandboxProvider;
  let handle: SandboxHandle | undefined;

  beforeAll(() => {
    process.env.REDIS_URL = 'redis://:hunter2@example.invalid:6379';
    process.env.LANES_API_TOKENS = 'tok-1,tok-2';
    process.env.LANES_CALLBACK_SECRET = 'cb-secret-sign-as-lanes';
  });
  afterAll(async () => {
    await handle?.terminate();
    await provider?.close();
    Object.assign(process.env, saved);
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
    rmSync(dir, { recursive: true, force: true });
  });

  it('shares one local provider across lanes, wraps faulty lanes, and reaps through the unwrapped one', async () => {
    const registry = await createProviderRegistry({ sandboxDir: dir, env: process.env, lanes });
    provider = registry.forLane(lanes[0]!);
    expect(registry.forLane(lanes[1]!)).toBe(provider);
    const faulty = registry.forLane(lanes[2]!);
    expect(faulty).toBeInstanceOf(FaultyProvider);
    expect(registry.forLane(lanes[2]!)).toBe(faulty);
    expect(registry.all(lanes)).toEqual([provider]);
  });

  it('builds the Modal provider for a Modal lane it was made for, and refuses one it was not', async () => {
    const remote = parseLanesConfig({ lanes: [{ name: 'remote', provider: 'modal', agent: ['true'] }] }).lanes;
    const env = { MODAL_TOKEN_ID: 'ak-registry', MODAL_TOKEN_SECRET: 'as-registry' };
    const withModal = await createProviderRegistry({ sandboxDir: dir, env, lanes: remote });
    const modal = withModal.forLane(remote[0]!);
    expect(modal.name).toBe('modal');
    expect(withModal.all(remote)).toEqual([modal]);
    await modal.close();
    const localOnly = await createProviderRegistry({ sandboxDir: dir, env, lanes });
    expect(() => localOnly.forLane(remote[0]!)).toThrow(ProviderInvalidError);
    expect(() => localOnly.forLane(remote[0]!)).toThrow('lane remote is not one of the lanes');
  });

  it('starts agents without the control plane credentials', async () => {
    handle = await provider.create({ image: 'local', tags: { lane: 'plain', slot: 's', worker: 'w' } });
    const { stdout, exitCode } = await handle.exec(['env']);
    expect(exitCode).toBe(0);
    expect(stdout).toContain('PATH=');
    expect(stdout).not.toContain('hunter2');
    expect(stdout).not.toContain('tok-1');
    expect(stdout).not.toContain('cb-secret-sign-as-lanes');
  });
});

describe("a local lane maps secrets from the worker's environment, never lanes' own", () => {
  const dir = mkdtempSync(join(tmpdir(), 'lanes-secrets-'));
  const provider = new LocalSandboxProvider({ baseDir: dir, isolation: detectIsolation(), secretEnv: { BOARD_TOKEN: 'board-secret-1', REDIS_URL: 'redis://:pw@x:6379' } });
  afterAll(async () => {
    await provider.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const spec = (secrets: string[]) => ({ image: 'local', tags: { lane: 'l', slot: 's', worker: 'w' }, secrets });

  it('hands the agent a mapped secret by name', async () => {
    const handle = await provider.create(spec(['BOARD_TOKEN']));
    try {
      expect((await handle.exec(['sh', '-c', 'printf %s "$BOARD_TOKEN"'])).stdout).toBe('board-secret-1');
    } finally {
      await handle.terminate();
    }
  });

  it.each([
    [['REDIS_URL'], 'secret REDIS_URL is a credential of lanes itself and never reaches an agent'],
    [['NOT_SET'], "secret NOT_SET is not set in the worker's environment"],
  ])('refuses %j before anything is made: %s', async (secrets, message) => {
    const before = readdirSync(dir).length;
    await expect(provider.create(spec(secrets))).rejects.toThrow(message);
    expect(readdirSync(dir)).toHaveLength(before);
  });
});
