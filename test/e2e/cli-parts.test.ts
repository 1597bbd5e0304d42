import { spawn, type ChildProcess } from 'node:child_process';
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
