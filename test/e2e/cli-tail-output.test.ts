import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '@lanes/cli';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/** A line every 100 ms, 20 in all. */
const TICKER = ['sh', '-c', 'for i in $(seq 1 20); do echo line-$i; sleep 0.1; done; echo oops >&2'];
const LINES = [...Array.from({ length: 20 }, (_, i) => `line-${i + 1}`), '[stderr] oops'];

/** `lanes tail --card ID` against a real stack: the card's output lines as they come, then exit at its end. */
describe('lanes tail --card', () => {
  let redis: TestRedis;
  let t: TestStack;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, [{ name: 'cli-out', slots: 1, agent: TICKER }]);
    env = { LANES_API_URL: t.stack.url! };
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it('prints the lines while the card runs and exits 0 when it ends', async () => {
    const id = `cli-out-${Date.now()}`;
    await t.api.request('POST', '/v1/cards', { id, lane: 'cli-out', title: 'tailed' });
    const out: string[] = [];
    const notes: string[] = [];
    const tailing = main(
      ['tail', '--card', id],
      env,
      (s) => out.push(s),
      new AbortController().signal,
      (s) => notes.push(s),
    );
    await waitFor('the first lines in the tail', () => out.length >= 3);
    // Shown as they come: the card is still running when its first lines are printed.
    expect((await t.api.card(id)).state).toBe('running');
    expect(await tailing).toBe(0);
    expect(out).toEqual(LINES);
    expect(notes[0]).toBe(`following the output of card ${id} until it ends (Ctrl-C to stop)`);
    // An ended card prints what it kept and exits at once.
    const again: string[] = [];
    expect(
      await main(
        ['tail', '--card', id],
        env,
        (s) => again.push(s),
        new AbortController().signal,
        () => undefined,
      ),
    ).toBe(0);
    expect(again).toEqual(LINES);
  });

  it('an unknown card is an error, not a wait', async () => {
    const errors: string[] = [];
    const code = await main(
      ['tail', '--card', 'no-such-card'],
      env,
      () => undefined,
      new AbortController().signal,
      (s) => errors.push(s),
    );
    expect(code).not.toBe(0);
  });

  it('Ctrl-C stops it with 130', async () => {
    const id = `cli-out-stop-${Date.now()}`;
    await t.api.request('POST', '/v1/cards', { id, lane: 'cli-out', title: 'stopped' });
    const out: string[] = [];
    const controller = new AbortController();
    const tailing = main(
      ['tail', '--card', id],
      env,
      (s) => out.push(s),
      controller.signal,
      () => undefined,
    );
    await waitFor('a line in the tail', () => out.length >= 1);
    controller.abort();
    expect(await tailing).toBe(130);
    await t.api.waitCard(id, 'done', (c) => c.state === 'done');
  });
});
