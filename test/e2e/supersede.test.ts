import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUPERSEDE_WAITING, type CardRecord } from '@lanes/contracts';
import { keys } from '@lanes/queue';
import { agentLedger, startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const LANE = 'pr';
/** Two slots: a second card of a key could run beside the first if nothing held it back. */
const SLOTS = 2;

/**
 * One run per PR (issue 27 item 2) on a whole stack (API, worker, supervisor) with real local
 * sandboxes and a real redis-server. Each agent records its start and end in a ledger outside the
 * sandboxes and works for its card's `metadata.ms`. A run killed by a cancel records no end: its
 * end is at the latest its cancelled move, which is written once the kill has finished.
 */
describe('supersedeKey: the newest card of a key wins (real stack)', () => {
  let redis: TestRedis;
  let t: TestStack;
  const dir = mkdtempSync(join(tmpdir(), 'lanes-supersede-'));
  const agentFile = join(dir, 'agent.mjs');
  const agentRecords = agentLedger(dir);
  const ledger = agentRecords.lines;
  const started = agentRecords.started;
  const post = async (cards: object[]) => {
    const res = await t.api.request('POST', '/v1/cards', { cards });
    expect(res.status, res.text).toBe(202);
  };
  const last = (c: CardRecord) => c.history.at(-1)!;
  /** When the card's run ended: its ledger end, else (killed) its terminal move. */
  const endOf = (c: CardRecord) => ledger().find((l) => l.id === c.id && l.ev === 'end')?.t ?? Date.parse(last(c).at);
  const startOf = (id: string) => ledger().find((l) => l.id === id && l.ev === 'start')!.t;

  beforeAll(async () => {
    writeFileSync(
      agentFile,
      `import { appendFileSync, readFileSync } from 'node:fs';
const card = JSON.parse(readFileSync(process.env.LANES_CARD_FILE, 'utf8'));
${agentRecords.logFunction}
log('start');
// A stubborn agent outlives SIGINT by the kill's grace, so a run beside it would be seen.
if (card.metadata?.stubborn) process.on('SIGINT', () => {});
setTimeout(() => { log('end'); }, card.metadata?.ms ?? 300);
`,
    );
    redis = await startRedis();
    t = await startTestStack(redis.url, [{ name: LANE, slots: SLOTS, agent: [process.execPath, agentFile], commandTimeoutMs: 120_000, killGraceMs: 200 }]);
    await waitFor('live sandboxes', async () => (await t.api.lanes())[0]?.slots.filter((s) => s.sandbox?.state === 'live').length === SLOTS);
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('cancel-running: three cards of one key posted while the first runs; the first two end cancelled as superseded, only the third runs, never two at once', {
    timeout: 60_000,
  }, async () => {
    const card = (id: string, ms: number, stubborn = false) => ({
      id,
      lane: LANE,
      title: `PR 42 (${id})`,
      supersedeKey: 'acme/web#42',
      supersede: 'cancel-running',
      metadata: { ms, stubborn },
    });
    await post([card('cr-1', 60_000, true)]);
    await waitFor('cr-1 started', async () => started('cr-1'));
    await post([card('cr-2', 60_000)]);
    await post([card('cr-3', 300)]);
    const c3 = await t.api.waitCard('cr-3', 'done', (c) => c.state === 'done', 30_000);
    const c1 = (await t.api.card('cr-1'))!;
    const c2 = (await t.api.card('cr-2'))!;
    expect(c1.state).toBe('cancelled');
    expect(last(c1).message).toBe('cancelled during agent: superseded by cr-2');
    expect(c2.state).toBe('cancelled');
    expect(last(c2).message).toMatch(/superseded by cr-3$/);
    // The running one's process group was killed, its sandbox kept: the third ran on one of the same sandboxes.
    expect(started('cr-2')).toBe(false);
    expect(startOf('cr-3')).toBeGreaterThanOrEqual(endOf(c1));
    expect(c3.history.filter((h) => h.state === 'running')).toHaveLength(1);
    const lanes = await t.api.lanes();
    expect(lanes[0]!.slots.map((s) => s.sandbox?.id)).toContain(c1.sandboxId);
  });

  it('queued (the default): a running card is left to finish while the newer one waits; a newer one still cancels one that waits', { timeout: 60_000 }, async () => {
    const card = (id: string, ms: number) => ({ id, lane: LANE, title: `PR 7 (${id})`, supersedeKey: 'acme/web#7', metadata: { ms } });
    await post([card('q-1', 2_500)]);
    await waitFor('q-1 started', async () => started('q-1'));
    await post([card('q-2', 300)]);
    // q-2 cannot run beside q-1 although a slot is free: it waits without one.
    const waiting = await t.api.waitCard('q-2', SUPERSEDE_WAITING, (c) => c.stateDetail === SUPERSEDE_WAITING, 10_000);
    expect(waiting.state).toBe('queued');
    const lane = (await t.api.lanes())[0]!;
    expect(lane.counts[SUPERSEDE_WAITING]).toBe(1);
    await post([card('q-3', 300)]);
    const q2 = await t.api.waitCard('q-2', 'cancelled', (c) => c.state === 'cancelled', 10_000);
    expect(last(q2).message).toBe('superseded by q-3');
    // Cancelled while q-1 still ran: at once, not when it came to run.
    expect((await t.api.card('q-1'))!.state).toBe('running');
    const q1 = await t.api.waitCard('q-1', 'done', (c) => c.state === 'done', 20_000);
    const q3 = await t.api.waitCard('q-3', 'done', (c) => c.state === 'done', 20_000);
    expect(started('q-2')).toBe(false);
    expect(startOf('q-3')).toBeGreaterThanOrEqual(endOf(q1));
    expect(q3.stateDetail).toBeUndefined();
  });

  it('a card whose arrival could not cancel its predecessor (the API gone in between) still leaves it to end superseded as it is taken, unstarted', {
    timeout: 60_000,
  }, async () => {
    // Both slots busy, so the card waits in the queue.
    await post([
      { id: 'busy-1', lane: LANE, title: 'busy', metadata: { ms: 60_000 } },
      { id: 'busy-2', lane: LANE, title: 'busy', metadata: { ms: 60_000 } },
    ]);
    await waitFor('both slots busy', async () => started('busy-1') && started('busy-2'));
    await post([{ id: 'lost-1', lane: LANE, title: 'PR 9', supersedeKey: 'acme/web#9', metadata: { ms: 300 } }]);
    // A newer card's arrival as the enqueue script records it, without the cancel that follows it.
    const raw = new Redis(redis.url);
    await raw.set(keys.supersedeLatest(LANE, 'acme/web#9'), 'lost-2');
    raw.disconnect();
    expect((await t.api.card('lost-1'))!.state).toBe('queued');
    for (const id of ['busy-1', 'busy-2']) expect((await t.api.request('POST', `/v1/cards/${id}/cancel`)).status).toBe(202);
    const lost = await t.api.waitCard('lost-1', 'cancelled', (c) => c.state === 'cancelled', 20_000);
    expect(last(lost).message).toBe('superseded by lost-2');
    expect(started('lost-1')).toBe(false);
  });

  it('a card without a supersede key is untouched, and a bad key or mode is a 400 naming the field', async () => {
    for (const [field, value] of [
      ['supersedeKey', 'has space'],
      ['supersedeKey', 'a:b'],
      ['supersede', 'sometimes'],
    ] as const) {
      const res = await t.api.request<{ error: { code: string; issues: Array<{ path: string }> } }>('POST', '/v1/cards', { lane: LANE, title: 'x', [field]: value });
      expect(res.status).toBe(400);
      expect(res.body.error.issues.map((i) => i.path)).toContain(field);
    }
  });
});
