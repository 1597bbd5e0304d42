import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_LIMIT_WAITING } from '@lanes/contracts';
import { EventLog, createRedis } from '@lanes/queue';
import { agentLedger, startRedis, startTestStack, waitFor, type LedgerLine, type TestRedis, type TestStack } from '../harness/index.js';

const LANE = 'fair';
const SLOTS = 4;
/** How long each card's agent works: one card-length. */
const CARD_MS = 1_000;
const A_CARDS = 20;
const B_CARDS = 4;

/** The most intervals of `key` open at one moment, from the ledger's start and end records. */
function maxConcurrent(lines: readonly LedgerLine[], key: string): number {
  const points = lines.filter((l) => l.key === key).map((l) => ({ t: l.t, d: l.ev === 'start' ? 1 : -1 }));
  // An end and a start at the same millisecond are not an overlap: ends first.
  points.sort((x, y) => x.t - y.t || x.d - y.d);
  let open = 0;
  let most = 0;
  for (const p of points) {
    open += p.d;
    most = Math.max(most, open);
  }
  return most;
}

/**
 * Issue 27 item 3's acceptance on a whole stack (API, worker, supervisor) with real local
 * sandboxes and a real redis-server: a lane of 4 slots with `maxRunningPerKey: 1` gets 20 cards of
 * repo A, then 4 of repo B. Repo A's cards over the limit are parked without a slot, so repo B's
 * first card starts within about one card-length, never do two cards of one repo run at once, and
 * every card ends done. Each agent records its start and end in a ledger outside the sandboxes.
 */
describe('fair per-key concurrency (real stack)', () => {
  let redis: TestRedis;
  let t: TestStack;
  const dir = mkdtempSync(join(tmpdir(), 'lanes-fair-'));
  const agentFile = join(dir, 'agent.mjs');
  const agentRecords = agentLedger(dir);
  const ledger = agentRecords.lines;

  beforeAll(async () => {
    writeFileSync(
      agentFile,
      `import { appendFileSync, readFileSync } from 'node:fs';
const card = JSON.parse(readFileSync(process.env.LANES_CARD_FILE, 'utf8'));
${agentRecords.logFunction}
log('start', { key: card.concurrencyKey });
setTimeout(() => { log('end', { key: card.concurrencyKey }); }, ${CARD_MS});
`,
    );
    redis = await startRedis();
    t = await startTestStack(redis.url, [{ name: LANE, slots: SLOTS, maxRunningPerKey: 1, agent: [process.execPath, agentFile], commandTimeoutMs: 60_000, killGraceMs: 200 }]);
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('repo B starts within about one card-length of arriving, one card per repo at a time, every card done', { timeout: 120_000 }, async () => {
    const cards = (key: string, prefix: string, n: number) =>
      Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${String(i).padStart(2, '0')}`, lane: LANE, title: `${key} #${i}`, concurrencyKey: key }));
    // Every slot's sandbox is live first, so the measure is the queue's, not the sandboxes' start.
    await waitFor('4 live sandboxes', async () => (await t.api.lanes())[0]?.slots.filter((s) => s.sandbox?.state === 'live').length === SLOTS);
    expect((await t.api.request('POST', '/v1/cards', { cards: cards('acme/a', 'a', A_CARDS) })).status).toBe(202);
    // Repo A fills the queue: its first card runs, the rest are parked, slot-free.
    await waitFor('repo A running', () => ledger().some((l) => l.key === 'acme/a' && l.ev === 'start'));
    const bPostedAt = Date.now();
    expect((await t.api.request('POST', '/v1/cards', { cards: cards('acme/b', 'b', B_CARDS) })).status).toBe(202);

    // A parked card says why it waits, stays queued, and the lane counts it.
    const parked = await t.api.waitCard('a-19', 'a-19 waiting (key limit)', (c) => c.stateDetail === KEY_LIMIT_WAITING);
    expect(parked.state).toBe('queued');
    // And says so on the event stream (what /v1/events serves): its key, gate and the backstop.
    const conn = createRedis(redis.url);
    const events = new EventLog(conn);
    const waiting = await waitFor('a-19 card.key-waiting on the event stream', async () =>
      (await events.recent(2_000)).find((e) => e.type === 'card.key-waiting' && e.cardId === 'a-19'),
    ).finally(() => conn.disconnect());
    expect(waiting).toMatchObject({ lane: LANE, data: { key: 'acme/a', gate: 'concurrency' } });
    expect(Date.parse(String(waiting.data?.retryAt))).toBeGreaterThan(Date.parse(waiting.at));
    const status = await waitFor('the lane counts parked cards', async () => {
      const lane = (await t.api.lanes())[0]!;
      return (lane.counts[KEY_LIMIT_WAITING] ?? 0) >= 10 ? lane : undefined;
    });
    expect(status.counts[KEY_LIMIT_WAITING]).toBeLessThanOrEqual(A_CARDS + B_CARDS - 2);
    // The scale endpoint counts only cards that could run: not the parked ones.
    const scale = (await t.api.request<{ depth: { total: number; dueDelayed: number } }>('GET', `/v1/lanes/${LANE}/scale`)).body;
    expect(scale.depth.dueDelayed).toBe(0);
    expect(scale.depth.total).toBeLessThan(status.counts[KEY_LIMIT_WAITING]!);

    const all = [...cards('acme/a', 'a', A_CARDS), ...cards('acme/b', 'b', B_CARDS)];
    for (const c of all) await t.api.waitCard(c.id, `${c.id} done`, (r) => r.state === 'done', 90_000);
    await waitFor('every end recorded', () => ledger().filter((l) => l.ev === 'end').length === all.length);

    const lines = ledger();
    const starts = (key: string) => lines.filter((l) => l.key === key && l.ev === 'start').map((l) => l.t);
    // Each card ran exactly once.
    expect(lines.filter((l) => l.ev === 'start')).toHaveLength(all.length);
    expect(maxConcurrent(lines, 'acme/a')).toBe(1);
    expect(maxConcurrent(lines, 'acme/b')).toBe(1);
    const firstB = Math.min(...starts('acme/b'));
    const lastA = Math.max(...starts('acme/a'));
    const bWaitMs = firstB - bPostedAt;
    // Within about one card-length: repo B waits for no card of repo A (a card's overhead on a loaded box allowed).
    expect(bWaitMs).toBeLessThan(2 * CARD_MS);
    // Repo B was done long before repo A: its 4 cards in turn beside A's 20.
    expect(Math.max(...starts('acme/b'))).toBeLessThan(lastA);
    console.log(`fair per-key: repo B's first card started ${bWaitMs} ms after it was posted; repo A's last started ${lastA - firstB} ms after that`);
    // Nothing is left parked or counted.
    const after = (await t.api.lanes())[0]!;
    expect(after.counts[KEY_LIMIT_WAITING]).toBe(0);
  });
});
