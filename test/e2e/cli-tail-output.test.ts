import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '@lanes/cli';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/** A line every 100 ms, 20 in all. */
const TICKER = ['sh', '-c', 'for i in $(seq 1 20); do echo line-$i; sleep 0.1; done; echo oops >&2'];
const LINES = [...Array.from({ length: 20 }, (_, i) => `line-${i + 1}`), '[stderr] oops'];
/**
 * An agent whose lines would drive the operator's terminal: colour and a tab (harmless, kept), OSC 52
 * (writes the clipboard), a cursor move, a C1 CSI, a bidi override; then a failure whose stderr
 * tail moves the cursor too.
 */
const STEERING = [
  'sh',
  '-c',
  String.raw`printf '\033[31mred\033[0m\tok\n\033]52;c;ZXZpbA==\007clip\n\033[2Aup\n\302\2332Jc1\n\342\200\256bidi\n'; printf 'fake\033[1Gover\n' >&2; exit 3`,
];
/** Any control character but the newline between printed lines, or a bidi override. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
const OBEYED = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

/** `lanes tail --card ID` against a real stack: the card's output lines as they come, then exit at its end. */
describe('lanes tail --card', () => {
  let redis: TestRedis;
  let t: TestStack;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, [
      { name: 'cli-out', slots: 1, agent: TICKER },
      { name: 'cli-steer', slots: 1, agent: STEERING, attempts: 1 },
    ]);
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

  it('prints what boards and agents wrote, never obeys it: control characters show as escapes, colour stays in output', async () => {
    const id = `cli-steer-${Date.now()}`;
    await t.api.request('POST', '/v1/cards', { id, lane: 'cli-steer', title: 'title\u001b]0;pwned\u0007 \u202eevil' });
    await t.api.waitCard(id, 'failed', (c) => c.state === 'failed');
    const run = async (argv: string[]) => {
      const out: string[] = [];
      expect(
        await main(
          argv,
          env,
          (s) => out.push(s),
          new AbortController().signal,
          () => undefined,
        ),
      ).toBe(0);
      return out;
    };
    expect(await run(['tail', '--card', id])).toEqual([
      '\u001b[31mred\u001b[0m\tok',
      '\\x1b]52;c;ZXZpbA==\\x07clip',
      '\\x1b[2Aup',
      '\\x9b2Jc1',
      '\\u202ebidi',
      '[stderr] fake\\x1b[1Gover',
    ]);
    const status = (await run(['status', id])).join('\n');
    expect(status).toContain('fake\\x1b[1Gover');
    expect(status).not.toMatch(OBEYED);
    const listed = (await run(['cards', '--lane', 'cli-steer'])).join('\n');
    expect(listed).toContain('title\\x1b]0;pwned\\x07 \\u202eevil');
    expect(listed).not.toMatch(OBEYED);
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
