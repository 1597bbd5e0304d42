import { describe, expect, it } from 'vitest';
import { CONCURRENCY_KEY_MAX_LENGTH, CardInputSchema, CardRecordSchema, KEY_LIMIT_WAITING, parseLanesConfig } from '@lanes/contracts';

const card = (concurrencyKey: unknown) => CardInputSchema.safeParse({ lane: 'l', title: 't', concurrencyKey });

describe('concurrencyKey', () => {
  it.each(['acme/widgets', 'org/repo#42', 'team@host', 'a', 'x'.repeat(CONCURRENCY_KEY_MAX_LENGTH), 'v1.2_beta+rc-3'])('takes %s', (key) => {
    expect(card(key).success).toBe(true);
  });

  it.each([
    ['empty', ''],
    ['one over the named max length', 'x'.repeat(CONCURRENCY_KEY_MAX_LENGTH + 1)],
    ['a colon (a Redis key separator)', 'acme:widgets'],
    ['whitespace', 'acme widgets'],
    ['a control character', 'acme\nwidgets'],
    ['a leading "/"', '/acme'],
    ['a leading "-"', '-acme'],
    ['not a string', 42],
  ])('refuses %s, naming the field', (_name, key) => {
    const parsed = card(key);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.path).toEqual(['concurrencyKey']);
  });

  it('shows a parked card’s detail in its record', () => {
    const record = { id: 'c', lane: 'l', title: 't', priority: 0, state: 'queued', attempts: 0, infraRetries: 0, createdAt: 'x', updatedAt: 'x', history: [] };
    expect(CardRecordSchema.parse({ ...record, stateDetail: KEY_LIMIT_WAITING }).stateDetail).toBe('waiting (key limit)');
    expect(CardRecordSchema.safeParse({ ...record, stateDetail: 'napping' }).success).toBe(false);
  });
});

describe('maxRunningPerKey', () => {
  const lanes = (maxRunningPerKey: unknown) => ({ lanes: [{ name: 'l', agent: ['true'], maxRunningPerKey }] });

  it('is optional, and taken as a positive integer', () => {
    expect(parseLanesConfig({ lanes: [{ name: 'l', agent: ['true'] }] }).lanes[0]!.maxRunningPerKey).toBeUndefined();
    expect(parseLanesConfig(lanes(2)).lanes[0]!.maxRunningPerKey).toBe(2);
  });

  it.each([0, -1, 1.5, '2'])('refuses %s, naming the key', (bad) => {
    expect(() => parseLanesConfig(lanes(bad))).toThrow(/lanes\.0\.maxRunningPerKey/);
  });
});
