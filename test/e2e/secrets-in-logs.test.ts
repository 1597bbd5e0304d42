import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT, PROJECT_DIR } from '@lanes/cli';
import type { LaneStatus } from '@lanes/contracts';
import { apiClient, freePort, startRedis, waitFor, type TestRedis } from '../harness/index.js';

const BIN = join(PROJECT_DIR, 'apps/cli/bin/lanes.js');
/** Every secret a deployment hands lanes; none may appear in any log line, in any spelling we send it in. */
const SECRETS = {
  LANES_API_TOKENS: 'tok-first-0a1b2c3d,tok-second-4e5f6a7b',
  LANES_CALLBACK_SECRET: 'cb-secret-8c9d0e1f2a3b4c5d',
  MODAL_TOKEN_ID: 'ak-modal-id-6e7f8a9b0c1d',
  MODAL_TOKEN_SECRET: 'as-modal-secret-2e3f4a5b6c7d',
};
const [TOKEN, SECOND_TOKEN] = SECRETS.LANES_API_TOKENS.split(',') as [string, string];
const basic = (password: string) => `Basic ${Buffer.from(`operator:${password}`).toString('base64')}`;

describe('a full run of `lanes up` logs no secret', () => {
  let redis: TestRedis;
  let dir: string;
  let child: ChildProcess | undefined;
  let receiver: Server;
  let callbacks = 0;
  const output: string[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-secrets-'));
    receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        callbacks++;
        res.end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
    await new Promise((r) => receiver?.close(r));
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('through cards, a callback, a sandbox death, refused and accepted logins, at trace level', async () => {
    const config = join(dir, 'lanes.json');
    writeFileSync(
      config,
      JSON.stringify({ lanes: [{ name: 'quiet', slots: 1, agent: [process.execPath, DEMO_AGENT], respawn: { baseDelayMs: 20, maxDelayMs: 200, windowMs: 60_000 } }] }),
    );
    const port = await freePort();
    child = spawn(process.execPath, [BIN, 'up', '--config', config, '--port', String(port)], {
      cwd: dir,
      env: {
        ...process.env,
        ...SECRETS,
        REDIS_URL: redis.url,
        LANES_SANDBOX_DIR: join(dir, 'sandboxes'),
        LANES_CALLBACK_ALLOW: '127.0.0.1',
        LANES_LOG_LEVEL: 'trace',
        LANES_LOG_FORMAT: 'json',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (b: Buffer) => output.push(b.toString()));
    child.stderr!.on('data', (b: Buffer) => output.push(b.toString()));
    const url = `http://127.0.0.1:${port}`;
    const api = apiClient(url, TOKEN);
    await waitFor('lanes up to answer', async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.ok);

    // Refused logins: a wrong token, a token in the wrong place, and a browser without one.
    expect((await apiClient(url, 'tok-wrong').request('GET', '/v1/lanes')).status).toBe(401);
    expect((await apiClient(url).request('GET', '/', undefined, { authorization: basic('nope') })).status).toBe(401);
    // Accepted ones, by bearer and by Basic (the browser's way), with both tokens.
    expect((await apiClient(url, SECOND_TOKEN).request('GET', '/v1/lanes')).status).toBe(200);
    expect((await apiClient(url).request('GET', '/', undefined, { authorization: basic(TOKEN) })).status).toBe(200);
    expect((await apiClient(url).request('GET', '/admin/queues/api/queues', undefined, { authorization: basic(SECOND_TOKEN) })).status).toBe(200);

    // A card with a signed callback.
    await api.request('POST', '/v1/cards', { id: 'quiet-1', lane: 'quiet', title: 'calls back', callbackUrl: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/cb` });
    await api.waitCard('quiet-1', 'done', (c) => c.state === 'done');
    await waitFor('the callback to arrive', () => callbacks > 0);

    // A sandbox killed under a running card: the dead-sandbox path logs the most.
    await api.request('POST', '/v1/cards', { id: 'quiet-2', lane: 'quiet', title: 'survives a kill', metadata: { sleepMs: 2_000 } });
    await api.waitCard('quiet-2', 'running', (c) => c.state === 'running');
    const slot = (await api.request<{ lanes: LaneStatus[] }>('GET', '/v1/lanes')).body.lanes[0]!.slots.find((s) => s.cardId === 'quiet-2')!;
    process.kill(slot.sandbox!.pid!, 'SIGKILL');
    await api.waitCard('quiet-2', 'done', (c) => c.state === 'done' && c.history.some((h) => h.blockedReason === 'sandbox-dead'));

    const exited = new Promise<number | null>((r) => child!.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);

    const text = output.join('');
    const lines = text.split('\n').filter(Boolean);
    // The run was really logged, at trace, through its interesting paths (so "no secret" means something).
    for (const event of ['card.done', 'sandbox.dead', 'sandbox.respawned']) expect(text, event).toContain(`"event":"${event}"`);
    expect(lines.length).toBeGreaterThan(50);
    const spellings = [
      TOKEN,
      SECOND_TOKEN,
      SECRETS.LANES_API_TOKENS,
      SECRETS.LANES_CALLBACK_SECRET,
      SECRETS.MODAL_TOKEN_ID,
      SECRETS.MODAL_TOKEN_SECRET,
      basic(TOKEN).slice(6),
      basic(SECOND_TOKEN).slice(6),
    ];
    for (const secret of spellings) {
      const leaks = lines.filter((l) => l.includes(secret));
      expect(leaks, `a log line holds ${secret.slice(0, 8)}…`).toEqual([]);
    }
  });
});
