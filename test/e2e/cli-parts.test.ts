import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import Module from 'node:module';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_DIR } from '@lanes/cli';
import { freePort, startRedis, waitFor, type TestRedis } from '../harness/index.js';

const BIN = join(PROJECT_DIR, 'apps/cli/bin/lanes.js');

/** The container commands: only the parts that reach a provider need its credentials (the API pod holds no Modal token). */
describe('lanes api / lanes worker with a Modal lane and no Modal credentials', () => {
  let redis: TestRedis;
  let dir: string;
  let config: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-parts-'));
    config = join(dir, 'lanes.json');
    writeFileSync(config, JSON.stringify({ lanes: [{ name: 'remote', provider: 'modal', agent: ['true'] }] }));
  });
  afterEach(async () => {
    for (const c of children.splice(0)) {
      if (c.exitCode !== null || c.signalCode !== null) continue;
      const gone = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await gone;
    }
  });
  afterAll(async () => {
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The binary with only what it needs: no MODAL_TOKEN_*, and a HOME without ~/.modal.toml. */
  function lanes(command: string, port: number) {
    const env = { PATH: process.env.PATH ?? '', HOME: dir, REDIS_URL: redis.url, LANES_PORT: String(port), LANES_LOG_FORMAT: 'json', LANES_API_TOKENS: 'parts-admin-token' };
    const child = spawn(process.execPath, [BIN, command, '--config', config], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    const output: string[] = [];
    child.stdout!.on('data', (b: Buffer) => output.push(b.toString()));
    child.stderr!.on('data', (b: Buffer) => output.push(b.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    return { child, output: () => output.join(''), exited };
  }

  it('lanes api starts and lists the Modal lane', async () => {
    const port = await freePort();
    const api = lanes('api', port);
    const url = `http://127.0.0.1:${port}`;
    await waitFor('the API to answer', async () => (await fetch(`${url}/healthz`).catch(() => undefined))?.ok, { abortOn: () => api.child.exitCode !== null });
    const res = await fetch(`${url}/v1/lanes`, { headers: { authorization: 'Bearer parts-admin-token' } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { lanes: Array<{ name: string; provider: string }> };
    expect(body.lanes.map((l) => [l.name, l.provider])).toEqual([['remote', 'modal']]);
    api.child.kill('SIGTERM');
    expect(await api.exited).toBe(0);
  });

  it('lanes worker refuses to start, naming the lane and the missing credentials', async () => {
    const worker = lanes('worker', await freePort());
    expect(await worker.exited).not.toBe(0);
    expect(worker.output()).toContain('lanes.0.provider');
    expect(worker.output()).toContain('MODAL_TOKEN_ID');
  });
});

/**
 * Each container loads only its own part: a worker pod, the one KEDA adds for a backlog, starts
 * without loading the API's server (Fastify, Bull Board) or the supervisor (bench/worker-boot.ts);
 * a remote command (status, cards, tail, …) loads none of the stack. Observed through a load hook
 * preloaded into the process (module.registerHooks: Node 22.15+), naming the parts, the two
 * libraries (queues, sandboxes) that weigh most, and the Modal SDK, which only a Modal lane loads.
 */
describe.runIf(typeof (Module as { registerHooks?: unknown }).registerHooks === 'function')('which parts a lanes container loads', () => {
  let redis: TestRedis;
  let dir: string;
  let config: string;
  let preload: string;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-part-loads-'));
    config = join(dir, 'lanes.json');
    writeFileSync(config, JSON.stringify({ lanes: [{ name: 'loads', provider: 'local', slots: 1, minSlots: 0, maxSlots: 1, agent: ['true'] }] }));
    preload = join(dir, 'report-parts.mjs');
    writeFileSync(
      preload,
      [
        "import { registerHooks } from 'node:module';",
        // Loaded, not only resolved: the CLI resolves `modal` to check which package it is (modal-package.ts).
        'registerHooks({ load(url, context, next) {',
        '  const part = /\\/(apps\\/(?:api|worker|supervisor)|libs\\/(?:queue|sandbox))\\/src\\/|\\/node_modules\\/(modal)\\//.exec(url);',
        '  if (part) process.stderr.write(`PART-LOADED ${part[1] ?? part[2]}\\n`);',
        '  return next(url, context);',
        '} });',
      ].join('\n'),
    );
  });
  afterAll(async () => {
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** What `lanes <command>` loaded by the time its probe (`path` on `port`) answered 200. */
  async function partsLoadedBy(command: string, env: Record<string, string>, port: number, path: string): Promise<string[]> {
    const child = spawn(process.execPath, ['--import', preload, BIN, command, '--config', config], {
      env: { PATH: process.env.PATH ?? '', HOME: dir, REDIS_URL: redis.url, LANES_SANDBOX_DIR: join(dir, 'sandboxes'), LANES_LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      await waitFor(`lanes ${command} to answer ${path}`, async () => (await fetch(`http://127.0.0.1:${port}${path}`).catch(() => undefined))?.ok, {
        abortOn: () => child.exitCode !== null,
      });
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    return loadedParts(stderr);
  }

  const loadedParts = (stderr: string) => [...new Set(stderr.match(/^PART-LOADED \S+$/gm) ?? [])].map((line) => line.split(' ')[1]!).sort();

  it('lanes worker loads the worker, not the API, the supervisor or, for local lanes, the Modal SDK', async () => {
    const port = await freePort();
    expect(await partsLoadedBy('worker', { LANES_HEALTH_PORT: String(port) }, port, '/readyz')).toEqual(['apps/worker', 'libs/queue', 'libs/sandbox']);
  });

  it('lanes api loads the API, not the worker or the supervisor', async () => {
    const port = await freePort();
    expect(await partsLoadedBy('api', { LANES_PORT: String(port) }, port, '/healthz')).toEqual(['apps/api', 'libs/queue', 'libs/sandbox']);
  });

  it('a remote command loads none of the stack', () => {
    const res = spawnSync(process.execPath, ['--import', preload, BIN, 'lanes'], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', HOME: dir, LANES_API_URL: 'http://127.0.0.1:9' },
      timeout: 30_000,
    });
    expect(res.stderr).toContain('cannot reach the API');
    expect(loadedParts(res.stderr)).toEqual([]);
  });
});
