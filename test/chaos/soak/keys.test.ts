import { describe, expect, it } from 'vitest';
import type { CardRecord } from '@lanes/contracts';
import { ADMISSION_SLACK_MS, crowdings, judgeKeys, spanOf, type KeyContext, type KeyedPlanCard, type KeyInput } from './keys.js';
import type { Run } from './ledger.js';

const T = 1_800_000_000_000;
const iso = (ms: number) => new Date(ms).toISOString();

/** A card whose history is these moves, each `[state, at, message?]`. */
const card = (id: string, moves: Array<[CardRecord['state'], number, string?, string?]>): CardRecord => ({
  id,
  lane: 'soak',
  title: id,
  priority: 0,
  state: moves.at(-1)![0],
  attempts: 1,
  infraRetries: 0,
  createdAt: '',
  updatedAt: '',
  history: moves.map(([state, at, message, sandboxId]) => ({ at: iso(at), state, attempt: 1, ...(message ? { message } : {}), ...(sandboxId ? { sandboxId } : {}) })),
});
const run = (c: string, r: string, startMs: number, endMs?: number, outcome = 'ok'): Run => ({
  card: c,
  run: r,
  sandbox: `sb-${r}`,
  startMs,
  ...(endMs !== undefined ? { endMs, outcome } : {}),
});
const span = (c: string, startMs: number, endMs: number) => ({ card: c, run: `r-${c}-${startMs}`, startMs, endMs });

function ctx(over: Partial<KeyContext>): KeyContext {
  return { cards: new Map(), runs: new Map(), workers: [], sandboxKills: [], acceptedCancels: new Set(), reposted: new Set(), inAdmitted: () => false, ...over };
}
const byCard = (runs: Run[]) => {
  const m = new Map<string, Run[]>();
  for (const r of runs) m.set(r.card, [...(m.get(r.card) ?? []), r]);
  return m;
};

describe('crowdings: runs of one key beyond its limit at once', () => {
  it.each<[string, ReturnType<typeof span>[], number, { crowded: number; maxAtOnce: number }]>([
    ['one run', [span('a', T, T + 1_000)], 1, { crowded: 0, maxAtOnce: 1 }],
    ['back to back (end = next start)', [span('a', T, T + 1_000), span('b', T + 1_000, T + 2_000)], 1, { crowded: 0, maxAtOnce: 1 }],
    ['overlap by 1 ms', [span('a', T, T + 1_000), span('b', T + 999, T + 2_000)], 1, { crowded: 1, maxAtOnce: 2 }],
    ['two at once, limit 2', [span('a', T, T + 1_000), span('b', T + 500, T + 2_000)], 2, { crowded: 0, maxAtOnce: 2 }],
    ['three at once, limit 2', [span('a', T, T + 3_000), span('b', T + 500, T + 3_000), span('c', T + 1_000, T + 2_000)], 2, { crowded: 1, maxAtOnce: 3 }],
    // Two runs of one card at once are the card's own gate (ranConcurrently), not its key's.
    ['two runs of the same card', [span('a', T, T + 1_000), span('a', T + 500, T + 2_000)], 1, { crowded: 0, maxAtOnce: 1 }],
  ])('%s', (_, spans, limit, want) => {
    const found = crowdings(spans, limit);
    expect({ crowded: found.crowded.length, maxAtOnce: found.maxAtOnce }).toEqual(want);
  });
});

describe('spanOf: a run with no end', () => {
  const c = ctx({});
  it.each<[string, Run, Partial<KeyContext>, number | undefined]>([
    ['ended', run('a', 'x', T, T + 1_000), {}, T + 1_000],
    ['no end, nothing known', run('a', 'x', T), {}, undefined],
    ['no end, its sandbox killed', run('a', 'x', T), { sandboxKills: [{ atMs: T + 700, sandboxId: 'sb-x', cardId: 'a', pid: 1 }] }, T + 700],
    ['no end, a kill of its sandbox before it started does not bound it', run('a', 'x', T), { sandboxKills: [{ atMs: T - 1, sandboxId: 'sb-x', cardId: 'a', pid: 1 }] }, undefined],
    [
      'no end, its worker killed',
      run('a', 'x', T),
      {
        cards: new Map([['a', card('a', [['running', T - 10, 'slot w1-0', 'sb-x']])]]),
        workers: [{ label: 'worker-0.0', workerId: 'w1', startedAtMs: T - 60_000, endedAtMs: T + 900, partitions: [], killed: true }],
      },
      T + 900,
    ],
  ])('%s', (_, r, over, endMs) => {
    const s = spanOf(r, { ...c, ...over, cards: over.cards ?? new Map([['a', card('a', [['running', T - 10]])]]) });
    expect(s?.endMs).toBe(endMs);
  });
});

describe('judgeKeys: concurrency keys', () => {
  const plan: KeyedPlanCard[] = [
    { id: 'a', concurrencyKey: 'k1' },
    { id: 'b', concurrencyKey: 'k1' },
    { id: 'c', concurrencyKey: 'k2' },
  ];
  const input: KeyInput = { plan, maxRunningPerKey: 1, postedAtMs: new Map() };
  it.each<[string, Run[], (from: number, to: number) => boolean, { beyondLimit: number; beyondLimitAdmitted: number; maxAtOnce: number }]>([
    [
      'one at a time per key, two keys at once',
      [run('a', 'x', T, T + 1_000), run('c', 'z', T, T + 1_000), run('b', 'y', T + 1_000, T + 2_000)],
      () => false,
      { beyondLimit: 0, beyondLimitAdmitted: 0, maxAtOnce: 1 },
    ],
    ['two cards of k1 at once', [run('a', 'x', T, T + 1_000), run('b', 'y', T + 999, T + 2_000)], () => false, { beyondLimit: 1, beyondLimitAdmitted: 0, maxAtOnce: 2 }],
    [
      'two cards of k1 at once inside a failover window',
      [run('a', 'x', T, T + 1_000), run('b', 'y', T + 999, T + 2_000)],
      () => true,
      { beyondLimit: 0, beyondLimitAdmitted: 1, maxAtOnce: 2 },
    ],
    // A run cancelled by a sandbox kill wrote no end: it ended at the latest at the kill.
    ['a killed run, the next card after the kill', [run('a', 'x', T), run('b', 'y', T + 2_000, T + 3_000)], () => false, { beyondLimit: 0, beyondLimitAdmitted: 0, maxAtOnce: 1 }],
  ])('%s', (_, runs, inAdmitted, want) => {
    const v = judgeKeys(input, ctx({ runs: byCard(runs), inAdmitted, sandboxKills: [{ atMs: T + 1_500, sandboxId: 'sb-x', cardId: 'a', pid: 1 }] }));
    const { beyondLimit, beyondLimitAdmitted, maxAtOnce } = v.figures.concurrency;
    expect({ beyondLimit, beyondLimitAdmitted, maxAtOnce }).toEqual(want);
    expect(v.examples.keyBeyondLimit).toHaveLength(want.beyondLimit);
  });
});

describe('judgeKeys: supersede keys', () => {
  const P = 'soak/repo#0';
  const group = (mode?: 'cancel-running'): KeyedPlanCard[] => ['s1', 's2'].map((id) => ({ id, supersedeKey: P, ...(mode ? { supersede: mode } : {}) }));
  /** s2 is posted at T (answered then). */
  const posted = new Map([
    ['s1', T - 1_000],
    ['s2', T],
  ]);
  const done = (id: string, runningAt: number, doneAt: number) =>
    card(id, [
      ['queued', runningAt - 100],
      ['running', runningAt],
      ['done', doneAt],
    ]);
  type Want = Partial<{
    supersededCancelled: number;
    supersededLeftToFinish: number;
    supersededBySoakCancel: number;
    supersededWrong: number;
    newestDone: number;
    newestBySoakCancel: number;
    newestWrong: number;
    overlaps: number;
  }>;
  it.each<[string, 'cancel-running' | undefined, Record<string, CardRecord>, Run[], Set<string>, Want]>([
    [
      'queued earlier card cancelled as superseded, the newest done',
      undefined,
      {
        s1: card('s1', [
          ['queued', T - 1_000],
          ['cancelled', T, 'superseded by s2'],
        ]),
        s2: done('s2', T + 100, T + 1_100),
      },
      [run('s2', 'b', T + 150, T + 1_050)],
      new Set(),
      { supersededCancelled: 1, newestDone: 1 },
    ],
    [
      'cancel-running: the running one cancelled during agent, the newest after its end',
      'cancel-running',
      {
        s1: card('s1', [
          ['queued', T - 1_000],
          ['running', T - 900],
          ['cancelled', T + 50, 'cancelled during agent: superseded by s2'],
        ]),
        s2: done('s2', T + 100, T + 1_100),
      },
      [run('s1', 'a', T - 850, T + 20, 'interrupted'), run('s2', 'b', T + 150, T + 1_050)],
      new Set(),
      { supersededCancelled: 1, newestDone: 1 },
    ],
    [
      'queued mode: running when the newer arrived, left to finish; the newer waits for its end',
      undefined,
      { s1: done('s1', T - 900, T + 500), s2: done('s2', T + 600, T + 1_600) },
      [run('s1', 'a', T - 850, T + 450), run('s2', 'b', T + 650, T + 1_550)],
      new Set(),
      { supersededLeftToFinish: 1, newestDone: 1 },
    ],
    [
      `queued mode: its running move ${ADMISSION_SLACK_MS} ms after the newer was answered still counts as left to finish (gate passed just before)`,
      undefined,
      { s1: done('s1', T + ADMISSION_SLACK_MS, T + 2_000), s2: done('s2', T + 2_100, T + 3_000) },
      [run('s1', 'a', T + ADMISSION_SLACK_MS + 10, T + 1_900), run('s2', 'b', T + 2_150, T + 2_900)],
      new Set(),
      { supersededLeftToFinish: 1, newestDone: 1 },
    ],
    [
      `queued mode: started ${ADMISSION_SLACK_MS + 1} ms after the newer was answered: its gate should have ended it`,
      undefined,
      { s1: done('s1', T + ADMISSION_SLACK_MS + 1, T + 2_000), s2: done('s2', T + 2_100, T + 3_000) },
      [run('s1', 'a', T + ADMISSION_SLACK_MS + 10, T + 1_900), run('s2', 'b', T + 2_150, T + 2_900)],
      new Set(),
      { supersededWrong: 1, newestDone: 1 },
    ],
    [
      'cancel-running: done although it was running when the newer arrived: the cancel was ignored',
      'cancel-running',
      { s1: done('s1', T - 900, T + 500), s2: done('s2', T + 600, T + 1_600) },
      [run('s1', 'a', T - 850, T + 450), run('s2', 'b', T + 650, T + 1_550)],
      new Set(),
      { supersededWrong: 1, newestDone: 1 },
    ],
    [
      'cancel-running: done because its run had finished before the newer was answered',
      'cancel-running',
      { s1: done('s1', T - 900, T + 5), s2: done('s2', T + 600, T + 1_600) },
      [run('s1', 'a', T - 850, T), run('s2', 'b', T + 650, T + 1_550)],
      new Set(),
      { supersededLeftToFinish: 1, newestDone: 1 },
    ],
    [
      'cancelled by the soak before the newer arrived, the newest cancelled by the soak too',
      undefined,
      {
        s1: card('s1', [
          ['queued', T - 1_000],
          ['cancelled', T - 500, 'cancelled before it ran'],
        ]),
        s2: card('s2', [
          ['queued', T],
          ['cancelled', T + 10, 'cancelled before it ran'],
        ]),
      },
      [],
      new Set(['s1', 's2']),
      { supersededBySoakCancel: 1, newestBySoakCancel: 1 },
    ],
    [
      'superseded by a card of another key: wrong; the newest cancelled with no cancel of the soak: wrong',
      undefined,
      {
        s1: card('s1', [
          ['queued', T - 1_000],
          ['cancelled', T, 'superseded by x9'],
        ]),
        s2: card('s2', [
          ['queued', T],
          ['cancelled', T + 10, 'superseded by s1'],
        ]),
      },
      [],
      new Set(),
      { supersededWrong: 1, newestWrong: 1 },
    ],
    [
      'the newest started while the earlier one still ran: two runs of the key at once',
      undefined,
      { s1: done('s1', T - 900, T + 500), s2: done('s2', T + 100, T + 1_600) },
      [run('s1', 'a', T - 850, T + 450), run('s2', 'b', T + 449, T + 1_550)],
      new Set(),
      { supersededLeftToFinish: 1, newestDone: 1, overlaps: 1 },
    ],
    [
      'the newest failed: wrong (the soak means no card to fail)',
      undefined,
      {
        s1: card('s1', [
          ['queued', T - 1_000],
          ['cancelled', T, 'superseded by s2'],
        ]),
        s2: card('s2', [
          ['queued', T],
          ['running', T + 100],
          ['failed', T + 200],
        ]),
      },
      [],
      new Set(),
      { supersededCancelled: 1, newestWrong: 1 },
    ],
  ])('%s', (_, mode, cards, runs, acceptedCancels, want) => {
    const v = judgeKeys({ plan: group(mode), postedAtMs: posted }, ctx({ cards: new Map(Object.entries(cards)), runs: byCard(runs), acceptedCancels }));
    const zero = {
      supersededCancelled: 0,
      supersededLeftToFinish: 0,
      supersededBySoakCancel: 0,
      supersededWrong: 0,
      newestDone: 0,
      newestBySoakCancel: 0,
      newestWrong: 0,
      overlaps: 0,
    };
    const s = v.figures.supersede;
    expect(Object.fromEntries(Object.keys(zero).map((k) => [k, s[k as keyof typeof zero]]))).toEqual({ ...zero, ...want });
    expect(s).toMatchObject({ keys: 1, cards: 2, superseded: 1, newest: 1 });
    expect(v.examples.supersededWrong).toHaveLength(want.supersededWrong ?? 0);
    expect(v.examples.newestWrong).toHaveLength(want.newestWrong ?? 0);
  });

  it("leaves a key unjudged when a failover lost one of its cards and the soak posted it again (its order is not the plan's)", () => {
    const cards = new Map([
      [
        's1',
        card('s1', [
          ['queued', T - 1_000],
          ['cancelled', T, 'superseded by s2'],
        ]),
      ],
      [
        's2',
        card('s2', [
          ['queued', T],
          ['cancelled', T + 10, 'superseded by s1'],
        ]),
      ],
    ]);
    const v = judgeKeys({ plan: group(), postedAtMs: posted }, ctx({ cards, reposted: new Set(['s1']) }));
    expect(v.figures.supersede).toMatchObject({ keysReposted: 1, superseded: 0, newest: 0, supersededWrong: 0, newestWrong: 0 });
  });
});
