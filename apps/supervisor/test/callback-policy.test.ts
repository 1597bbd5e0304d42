import { describe, expect, it } from 'vitest';
import { evaluateCallback, isNotified } from '@lanes/supervisor';

const config = { maxAttempts: 3, baseDelayMs: 1_000 };

describe('evaluateCallback', () => {
  it.each([
    [{ status: 200 }, 1, 'done'],
    [{ status: 204 }, 3, 'done'],
    [{ status: 500 }, 1, 'retry'],
    [{ status: 503 }, 2, 'retry'],
    [{ status: 503 }, 3, 'give-up'],
    [{ status: 408 }, 1, 'retry'],
    [{ status: 429 }, 1, 'retry'],
    [{ status: 400 }, 1, 'give-up'],
    [{ status: 404 }, 1, 'give-up'],
    [{ status: 302 }, 1, 'retry'],
    [{ error: 'ECONNREFUSED' }, 1, 'retry'],
    [{ error: 'timeout' }, 3, 'give-up'],
  ] as const)('%j on attempt %i → %s', (result, attempt, action) => {
    expect(evaluateCallback(result, attempt, config).action).toBe(action);
  });

  it.each([
    [1, 1_000],
    [2, 2_000],
  ])('backs off: after attempt %i waits %i ms', (attempt, delayMs) => {
    expect(evaluateCallback({ status: 502 }, attempt, config)).toMatchObject({ action: 'retry', delayMs });
  });
});

describe('isNotified', () => {
  it.each([
    ['card.done', true],
    ['card.failed', true],
    ['card.cancelled', true],
    ['card.blocked', true],
    ['card.running', false],
    ['card.queued', false],
    ['card.redriven', false],
    ['sandbox.dead', false],
  ] as const)('%s → %s', (type, notified) => {
    expect(isNotified(type)).toBe(notified);
  });
});
