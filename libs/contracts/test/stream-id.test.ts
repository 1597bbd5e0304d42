import { describe, expect, it } from 'vitest';
import { StreamIdSchema, compareStreamIds } from '@lanes/contracts';

describe('StreamIdSchema', () => {
  it.each([
    ['0-0', true],
    ['1700000000000-0', true],
    ['1700000000000-12', true],
    ['18446744073709551615-18446744073709551615', true],
    ['18446744073709551616-0', false], // 2^64: past 64 bits
    ['0-18446744073709551616', false],
    ['01-0', false], // leading zero: not canonical, would compare wrongly
    ['1-01', false],
    ['1700000000000', false], // no sequence
    ['$', false],
    ['-1-0', false],
    ['1-0 ', false],
    ['', false],
    ['a-b', false],
  ])('%j valid: %s', (id, valid) => {
    expect(StreamIdSchema.safeParse(id).success).toBe(valid);
  });
});

describe('compareStreamIds', () => {
  it.each([
    ['1-0', '1-0', 0],
    ['1-0', '1-1', -1],
    ['1-1', '1-0', 1],
    ['9-0', '10-0', -1], // by number, not by text
    ['10-0', '9-99', 1],
    ['5-9', '5-10', -1],
    ['0-0', '1700000000000-0', -1],
    ['18446744073709551615-1', '18446744073709551615-0', 1], // beyond 2^53, no float rounding
  ])('%s vs %s → %i', (a, b, sign) => {
    expect(compareStreamIds(a, b)).toBe(sign);
  });
});
