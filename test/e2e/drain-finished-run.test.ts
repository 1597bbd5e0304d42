import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/**
 * An agent that finishes as its worker drains: the stop reaches it (SIGINT), and it still ends with
 * its own answer (exit 0 and a result.json). Nobody asked this card to stop, so that finished run
 * is committed, not handed back to run again (DESIGN "No finished run is thrown away"). A board's
 * cancel of the same agent still ends the card cancelled: the board asked for that.
 *
 * The agent says when it runs, and finishes only once the SIGINT has reached it, so the stop is
 * always under way when it answers.
 */
const AGENT = [
  'trap \'touch "$1/$LANES_CARD_ID.int"\' INT',
  "trap '' TERM",
  'touch "$1/$LANES_CARD_ID.started"',
  'while [ ! -e "$1/$LANES_CARD_ID.int" ]; do sleep 0.05; done',
  'printf \'{"finished":"%s"}\' "$LANES_CARD_ID" > "$LANES_OUTPUT_DIR/result.json"',
  'exit 0',
].join('\n');
/** Longer than the agent takes after its SIGINT, so no SIGTERM or SIGKILL is needed. */
const KILL_GRACE_MS = 5_000;

describe('a run that finishes while its worker drains', () => {
  let redis: TestRedis;
  let api: TestStack;
  let dir: string;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-drain-'));
    chmodSync(dir, 0o777);
    api = await startTestStack(redis.url, [lane()], { parts: { api: true, worker: false, supervisor: false } });
  });
  afterAll(async () => {
    await api?.stop();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function lane() {
    return { name: 'drain', slots: 1, agent: ['sh', '-c', AGENT, 'agent', dir ?? ''], killGraceMs: KILL_GRACE_MS };
  }

  async function startedOn(id: string): Promise<TestStack> {
    const worker = await startTestStack(redis.url, [lane()], { parts: { api: false, worker: true, supervisor: false } });
    await api.api.request('POST', '/v1/cards', { id, lane: 'drain', title: 'finishes as the worker drains' });
    await waitFor(`${id}'s agent to start`, () => existsSync(join(dir, `${id}.started`)), { timeoutMs: 30_000 });
    return worker;
  }

  it('commits the agent answer that came after the stop: the card is done once, by its one run, not handed back', async () => {
    const worker = await startedOn('drain-1');
    await worker.stop();
    expect(existsSync(join(dir, 'drain-1.int')), 'the stop reached the agent').toBe(true);
    const card = await api.api.waitCard('drain-1', 'done', (c) => c.state === 'done' || c.state === 'queued', 10_000);
    expect(card.state).toBe('done');
    expect(card.result).toEqual({ finished: 'drain-1' });
    expect(card.history.map((h) => h.state)).toEqual(['queued', 'running', 'done']);
    expect(card.attempts).toBe(1);
  }, 60_000);

  it("a board's cancel of the same agent still ends the card cancelled", async () => {
    const worker = await startedOn('drain-2');
    try {
      expect((await api.api.request('POST', '/v1/cards/drain-2/cancel')).status).toBe(202);
      const card = await api.api.waitCard('drain-2', 'cancelled', (c) => c.state === 'cancelled' || c.state === 'done', 30_000);
      expect(card.state).toBe('cancelled');
      expect(existsSync(join(dir, 'drain-2.int')), 'the cancel reached the agent').toBe(true);
    } finally {
      await worker.stop();
    }
  }, 60_000);
});
