import { describe, expect, it } from 'vitest';
import { BOOT_VALIDATION_WARMUP_CARDS, warmCardValidation } from '../src/validation-warmup.js';

describe('the validation warm-up an API runs as it starts', () => {
  it('validates its count of cards of the first configured lane, the longest lane name included', () => {
    expect(warmCardValidation([{ name: 'board-a' }, { name: 'board-b' }])).toBe(BOOT_VALIDATION_WARMUP_CARDS);
    expect(warmCardValidation([{ name: 'l'.repeat(64) }], 10)).toBe(10);
  });

  it('never stops a start: no lane, or one the card schema refuses, warms nothing and throws nothing', () => {
    expect(warmCardValidation([])).toBe(0);
    expect(warmCardValidation([{ name: 'not a lane' }], 10)).toBe(0);
  });
});
