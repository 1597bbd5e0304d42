import { describe, expect, it } from 'vitest';
import { CardValidationError, ConfigError, gitRefProblem, isTerminalCardState, parseCard, parseLanesConfig } from '@lanes/contracts';

const makeId = () => 'generated-id';

describe('parseCard', () => {
  it('accepts the minimal card and generates an id', () => {
    const card = parseCard({ lane: 'pr-review', title: 'Fix flaky test' }, makeId);
    expect(card).toEqual({ id: 'generated-id', lane: 'pr-review', title: 'Fix flaky test', priority: 0 });
  });

  it('keeps metadata and the given id', () => {
    const card = parseCard({ id: 'c.1_x-2', lane: 'a', title: 't', metadata: { n: [1, { k: null }] } }, makeId);
    expect(card.id).toBe('c.1_x-2');
    expect(card.metadata).toEqual({ n: [1, { k: null }] });
  });

  it.each([
    [{ title: 't' }, 'lane'],
    [{ lane: 'a' }, 'title'],
    [{ lane: 'a:b', title: 't' }, 'lane'],
    [{ id: 'has:colon', lane: 'a', title: 't' }, 'id'],
    [{ lane: 'a', title: 't', pr: { number: 'twelve', branch: 'x' } }, 'pr.number'],
    [{ lane: 'a', title: 't', callbackUrl: 'not a url' }, 'callbackUrl'],
    // A card id names a directory in the sandbox: `..` would be its parent.
    [{ id: '..', lane: 'a', title: 't' }, 'id'],
    [{ id: '.', lane: 'a', title: 't' }, 'id'],
    [{ id: '-rf', lane: 'a', title: 't' }, 'id'],
    [{ id: 'x'.repeat(129), lane: 'a', title: 't' }, 'id'],
    // Branches reach git on an agent's command line.
    [{ lane: 'a', title: 't', pr: { number: 1, branch: '--upload-pack=touch /tmp/pwn' } }, 'pr.branch'],
    [{ lane: 'a', title: 't', pr: { number: 1, branch: 'fix x' } }, 'pr.branch'],
    [{ lane: 'a', title: 't', pr: { number: 1, branch: 'a\nb' } }, 'pr.branch'],
    [{ lane: 'a', title: 't', pr: { number: 1, branch: 'a..b' } }, 'pr.branch'],
    [{ lane: 'a', title: 't', pr: { number: 1, branch: 'ok', base: '-main' } }, 'pr.base'],
    [{ lane: 'a', title: 't', surprise: 1 }, 'surprise'],
    // Title and repo reach the agent as environment variables, where a NUL cannot be.
    [{ lane: 'a', title: 'fix\u0000it' }, 'title'],
    [{ lane: 'a', title: 't', repo: 'github.com/o/r\u0000' }, 'repo'],
    // Over BullMQ's own limit (2²¹ − 1): its add would refuse the job after the record was written.
    [{ lane: 'a', title: 't', priority: 2_097_152 }, 'priority'],
  ])('names the bad field in %j', (input, field) => {
    try {
      parseCard(input, makeId);
      expect.unreachable('should have thrown');
    } catch (err) {
      expect(err).toBeInstanceOf(CardValidationError);
      const e = err as CardValidationError;
      expect(e.message).toContain(field);
      expect(e.issues.length).toBeGreaterThan(0);
    }
  });

  it('takes any other text in a title or repo: newlines, tabs, quotes, emoji', () => {
    const title = 'Fix "flaky" test\n\twith $HOME and `x` ✓';
    expect(parseCard({ lane: 'a', title, repo: 'https://example.com/o/r?x=1&y' }, makeId)).toMatchObject({ title, repo: 'https://example.com/o/r?x=1&y' });
  });

  it('takes a 128-character id and ordinary branch names', () => {
    const id = `a${'b'.repeat(127)}`;
    const card = parseCard({ id, lane: 'a', title: 't', pr: { number: 1, branch: 'feat/x-1_2.3', base: 'release/2026.12' } }, makeId);
    expect(card.id).toBe(id);
  });

  it.each([
    ['-x', 'must not start with "-"'],
    ['a\tb', 'whitespace or control'],
    ['a\u007fb', 'whitespace or control'],
    ['a..b', '".."'],
    ['a~1', '~ ^ :'],
    ['a^', '~ ^ :'],
    ['a:b', '~ ^ :'],
    ['a\\b', '~ ^ :'],
    ['a@{1}', '@{'],
    ['/a', '"/"'],
    ['a//b', '"/"'],
    ['a/', '"/"'],
    ['a.lock', '.lock'],
    ['a/.hidden', '"."'],
    ['a.', '"."'],
  ])('gitRefProblem refuses %j', (ref, why) => {
    expect(gitRefProblem(ref)).toContain(why);
  });

  it.each(['main', 'fix/flaky', 'feat/x-1_2.3', 'v1.2', 'user@host', 'a-'])('gitRefProblem takes %j', (ref) => {
    expect(gitRefProblem(ref)).toBeUndefined();
  });

  it('refuses a non-object', () => {
    expect(() => parseCard('nope', makeId)).toThrow(CardValidationError);
  });
});

describe('parseLanesConfig', () => {
  it('applies defaults', () => {
    const cfg = parseLanesConfig({ lanes: [{ name: 'pr-review', agent: ['bash', 'agent.sh'] }] });
    const lane = cfg.lanes[0]!;
    expect(lane.provider).toBe('local');
    expect(lane.slots).toBe(1);
    expect(lane.minSlots).toBe(1);
    expect(lane.maxSlots).toBe(1);
    expect(lane.attempts).toBe(2);
    expect(lane.infraRetries).toBe(3);
    expect(lane.breaker.failureThreshold).toBe(5);
  });

  it.each([
    [{ lanes: [{ name: 'x' }] }, 'lanes.0.agent'],
    [{ lanes: [{ name: 'x', agent: ['a'], slots: 0 }] }, 'lanes.0.slots'],
    [{ lanes: [{ name: 'x', agent: ['a'], slots: 2, maxSlots: 1 }] }, 'lanes.0.maxSlots'],
    [{ lanes: [{ name: 'x', agent: ['a'], comandTimeoutMs: 5 }] }, 'comandTimeoutMs'],
    [
      {
        lanes: [
          { name: 'x', agent: ['a'] },
          { name: 'x', agent: ['b'] },
        ],
      },
      'lanes.1.name',
    ],
    [{ lanes: [] }, 'lanes'],
    [{ lanes: [{ name: 'x', agent: ['a'], minSlots: 4, maxSlots: 2 }] }, 'lanes.0.minSlots'],
    [{ lanes: [{ name: 'x', agent: ['a'], slotScaling: { downDelayMs: -1 } }] }, 'lanes.0.slotScaling.downDelayMs'],
  ])('names the wrong key in %j', (input, key) => {
    expect(() => parseLanesConfig(input)).toThrow(ConfigError);
    expect(() => parseLanesConfig(input)).toThrow(key);
  });
});

describe('slot bounds', () => {
  it.each([
    ['slots alone: a fixed lane', { slots: 3 }, { slots: 3, minSlots: 3, maxSlots: 3 }],
    ['bounds alone: a worker grows to maxSlots', { minSlots: 1, maxSlots: 6 }, { slots: 6, minSlots: 1, maxSlots: 6 }],
    ['slots per worker under a lane-wide max', { slots: 2, minSlots: 1, maxSlots: 8 }, { slots: 2, minSlots: 1, maxSlots: 8 }],
    ['only maxSlots', { maxSlots: 4 }, { slots: 4, minSlots: 4, maxSlots: 4 }],
    ['only minSlots', { slots: 3, minSlots: 1 }, { slots: 3, minSlots: 1, maxSlots: 3 }],
  ])('%s', (_name, bounds, expected) => {
    expect(parseLanesConfig({ lanes: [{ name: 'x', agent: ['a'], ...bounds }] }).lanes[0]).toMatchObject(expected);
  });
});

describe('isTerminalCardState', () => {
  it.each([
    ['queued', false],
    ['running', false],
    ['blocked', false],
    ['done', true],
    ['failed', true],
    ['cancelled', true],
  ] as const)('%s → %s', (state, terminal) => {
    expect(isTerminalCardState(state)).toBe(terminal);
  });
});
