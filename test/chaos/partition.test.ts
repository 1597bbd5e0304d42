import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, keys } from '@lanes/queue';
import { freePort, startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const LOCK_DURATION_MS = 2_500;

/** One worker's own road to Redis, which the test can cut and mend: a network partition of that worker alone. */
async function partitionableLink(redisPort: number): Promise<{ url: string; cut(): void; heal(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let down = false;
  const server: Server = createServer((client) => {
    if (down) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: '127.0.0.1', port: redisPort });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${port}`,
    cut() {
      down = true;
      for (const s of sockets) s.destroy();
    },
    heal() {
      down = false;
    },
    // server.close() waits for every connection through the link: end them (the stacks have stopped).
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}

/** Run 1 works a second (long enough to be cut off mid-run); later runs finish at once. */
const AGENT = `
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
const ledger = process.env.FENCE_LEDGER;
const run = (existsSync(ledger) ? readFileSync(ledger, 'utf8').split('\\n').filter((l) => l.startsWith('start')).length : 0) + 1;
appendFileSync(ledger, 'start ' + run + '\\n');
setTimeout(() => {
  writeFileSync(join(process.env.LANES_OUTPUT_DIR, 'result.json'), JSON.stringify({ run }));
  appendFileSync(ledger, 'end ' + run + '\\n');
}, run === 1 ? 1_000 : 100);
`;

/** Run 1 waits for the test's go file (so it finishes while its worker is cut off); later runs finish at once. */
const AGENT_ON_CUE = `
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
const ledger = process.env.FENCE_LEDGER;
const run = (existsSync(ledger) ? readFileSync(ledger, 'utf8').split('\\n').filter((l) => l.startsWith('start')).length : 0) + 1;
appendFileSync(ledger, 'start ' + run + '\\n');
const finish = () => {
  writeFileSync(join(process.env.LANES_OUTPUT_DIR, 'result.json'), JSON.stringify({ run }));
  appendFileSync(ledger, 'end ' + run + '\\n');
};
if (run > 1) finish();
else {
  const cue = setInterval(() => {
    if (!existsSync(process.env.FENCE_GO)) return;
    clearInterval(cue);
    finish();
  }, 20);
}
`;

describe('chaos: one worker partitioned from Redis while its card finishes', () => {
  let redis: TestRedis;
  let dir: string;
  let link: Awaited<ReturnType<typeof partitionableLink>>;
  const stacks: TestStack[] = [];
  const conns: Array<ReturnType<typeof createRedis>> = [];

  beforeAll(async () => {
    redis = await startRedis();
    link = await partitionableLink(redis.port);
    dir = mkdtempSync(join(tmpdir(), 'lanes-partition-'));
  });
  afterAll(async () => {
    for (const c of conns) c.disconnect();
    link?.heal();
    for (const s of stacks.reverse()) await s.stop();
    await link?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the cut-off worker's late done is refused and logged as card.stale-write; the card ends once, by the run that took over", async () => {
    const agentPath = join(dir, 'agent.mjs');
    const ledgerPath = join(dir, 'ledger.txt');
    writeFileSync(agentPath, AGENT);
    const lane = { name: 'part', slots: 1, agent: [process.execPath, agentPath], killGraceMs: 100, env: { FENCE_LEDGER: ledgerPath } };
    const common = { sandboxDir: join(dir, 'sandboxes'), lockDurationMs: LOCK_DURATION_MS, heartbeatIntervalMs: 500 };
    const ledger = () => readFileSync(ledgerPath, 'utf8').trim().split('\n');
    const logs: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) logs.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });

    const api = await startTestStack(redis.url, [lane], { ...common, parts: { api: true, worker: false, supervisor: false } });
    stacks.push(api);
    // Worker A reaches Redis only through the link; it alone can take the card at first.
    const a = await startTestStack(link.url, [lane], { ...common, parts: { api: false, worker: true, supervisor: false }, log: pino({ level: 'warn' }, sink) });
    stacks.push(a);
    await api.api.request('POST', '/v1/cards', { id: 'part-1', lane: 'part', title: 'finishes while cut off' });
    await waitFor('run 1 to start on worker A', () => ledger().length === 1);
    link.cut();
    // Worker B sees Redis directly.
    stacks.push(await startTestStack(redis.url, [lane], { ...common, parts: { api: false, worker: true, supervisor: false } }));

    // Run 1 finishes while A is cut off: its done is on its way, but A cannot deliver it.
    await waitFor('run 1 to finish in its sandbox', () => ledger().includes('end 1'));
    const done = await api.api.waitCard('part-1', 'done by worker B', (c) => c.state === 'done', 30_000);
    expect(done.result).toEqual({ run: 2 });

    link.heal();
    const slotA = a.stack.worker!.lanes.get('part')!.pool.slots[0]!;
    await waitFor("worker A's run to settle after the partition", () => slotA.cardId === undefined, { timeoutMs: 30_000 });
    expect(logs.filter((l) => l.event === 'card.stale-write')).toEqual([
      expect.objectContaining({ cardId: 'part-1', lane: 'part', to: 'done', slot: slotA.id, sandboxId: expect.any(String) }),
    ]);
    const after = (await api.api.card('part-1'))!;
    expect(after.history.map((h) => h.state)).toEqual(['queued', 'running', 'running', 'done']);
    expect(after.result).toEqual({ run: 2 });
    // The takeover happened only after A had lost its lock: the two runs did not overlap in the ledger.
    expect(ledger()).toEqual(['start 1', 'end 1', 'start 2', 'end 2']);
  }, 90_000);

  /**
   * A lane whose only worker reaches Redis through the link (so nobody else can take its card over),
   * its agent on cue, and an API beside it on Redis directly: run 1 of `cardId` is started, then the
   * link cut while the job is off the stalled check's list (each renewal takes it off, each check puts
   * it back), so the first check after the heal only marks it, as after any renewal.
   */
  async function cutOffOnCue(name: string, cardId: string) {
    const agentPath = join(dir, `${name}-agent.mjs`);
    const ledgerPath = join(dir, `${name}-ledger.txt`);
    const goPath = join(dir, `${name}-go`);
    writeFileSync(agentPath, AGENT_ON_CUE);
    const lane = { name, slots: 1, agent: [process.execPath, agentPath], killGraceMs: 100, env: { FENCE_LEDGER: ledgerPath, FENCE_GO: goPath } };
    const common = { sandboxDir: join(dir, 'sandboxes'), lockDurationMs: LOCK_DURATION_MS, heartbeatIntervalMs: 500 };
    const ledger = () => (existsSync(ledgerPath) ? readFileSync(ledgerPath, 'utf8').trim().split('\n') : []);
    const logs: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) logs.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const api = await startTestStack(redis.url, [lane], { ...common, parts: { api: true, worker: false, supervisor: false } });
    stacks.push(api);
    stacks.push(await startTestStack(link.url, [lane], { ...common, parts: { api: false, worker: true, supervisor: false }, log: pino({ level: 'warn' }, sink) }));
    const conn = createRedis(redis.url);
    conns.push(conn);
    await api.api.request('POST', '/v1/cards', { id: cardId, lane: name, title: 'finishes while its worker is cut off' });
    await waitFor('run 1 to start on the cut-off worker', () => ledger().length === 1);
    const stalled = async () => (await conn.sismember(keys.jobStalled(name), cardId)) === 1;
    await waitFor('a renewal since the last stalled check', async () => !(await stalled()));
    link.cut();
    expect(await stalled()).toBe(false);
    return {
      api,
      logs,
      ledger,
      /** Lets run 1 finish, in its sandbox, while the worker is cut off. */
      finish: async () => {
        writeFileSync(goPath, '');
        await waitFor('run 1 to finish in its sandbox', () => ledger().includes('end 1'));
      },
      lockLapsed: () => waitFor("the run's lock to lapse", async () => (await conn.exists(keys.jobLock(name, cardId))) === 0, { timeoutMs: LOCK_DURATION_MS + 5_000 }),
    };
  }

  it("the cut-off worker's finished run commits once it heals, when nobody took the card meanwhile: one run in the ledger, one done", async () => {
    const { api, logs, ledger, finish, lockLapsed } = await cutOffOnCue('part-late', 'late-1');
    await finish();
    await waitFor('the run to be fenced', () => logs.some((l) => l.event === 'card.fenced'), { timeoutMs: LOCK_DURATION_MS + 5_000 });
    await lockLapsed();
    expect((await api.api.card('late-1'))!.state).toBe('running');

    link.heal();
    const done = await api.api.waitCard('late-1', 'done by run 1, committed late', (c) => c.state === 'done', 30_000);
    expect(done.result).toEqual({ run: 1 });
    expect(done.history.map((h) => h.state)).toEqual(['queued', 'running', 'done']);
    expect(ledger()).toEqual(['start 1', 'end 1']);
    // The worker logs the late commit when its script's reply arrives, which may be after the API already reads done.
    await waitFor('the late commit logged', () => logs.some((l) => l.event === 'card.late-commit'));
    expect(logs.filter((l) => l.event === 'card.late-commit')).toEqual([expect.objectContaining({ cardId: 'late-1', to: 'done' })]);
    expect(logs.filter((l) => l.event === 'card.stale-write' || l.event === 'card.discarded')).toEqual([]);
    const job = await api.stack.api!.queues.job('late-1', 'part-late');
    await waitFor('the job to complete', async () => (await job?.getState()) === 'completed');
  }, 90_000);

  it('a cancel answered while the worker was cut off wins over its finished run: the card ends cancelled, and nothing runs again', async () => {
    const { api, logs, ledger, finish, lockLapsed } = await cutOffOnCue('part-cancel', 'cancel-1');
    expect((await api.api.request('POST', '/v1/cards/cancel-1/cancel', {})).status).toBe(202);
    // The agent finishes after the cancel was answered; its worker never heard of it.
    await finish();
    await lockLapsed();
    link.heal();
    const ended = await api.api.waitCard('cancel-1', 'cancelled', (c) => c.state === 'cancelled' || c.state === 'done', 30_000);
    expect(ended.state).toBe('cancelled');
    expect(logs.filter((l) => l.event === 'card.late-commit')).toEqual([]);
    expect(logs.filter((l) => l.event === 'card.stale-write')).toEqual([expect.objectContaining({ cardId: 'cancel-1', to: 'done' })]);
    expect(ledger()).toEqual(['start 1', 'end 1']);
  }, 90_000);
});
