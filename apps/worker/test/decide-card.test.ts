import { describe, expect, it } from 'vitest';
import { LaneConfigSchema } from '@lanes/contracts';
import { decideCard, NEEDS_HUMAN_HOLD_MS, SANDBOX_DEAD_BACKSTOP_MS, type CardAction, type CardOutcome, type RunContext } from '../src/index.js';
import { withCancelReason } from '../src/decide-card.js';

const NOW = Date.UTC(2025, 5, 1, 12, 0, 0);
const lane = LaneConfigSchema.parse({ name: 'l', agent: ['true'], infraRetries: 2, breaker: { openMs: 7_000 } });
const run: RunContext = { attempt: 1, maxAttempts: 2, slot: 'w-l-0', sandboxId: 'sb-1' };
const where = { attempt: 1, slot: 'w-l-0', sandboxId: 'sb-1' };

describe('decideCard', () => {
  it.each<[string, CardOutcome, { infraRetries: number }, RunContext, CardAction]>([
    [
      'done → complete with the result',
      { kind: 'done', result: { pr: 1 }, step: 'agent' },
      { infraRetries: 0 },
      run,
      { kind: 'complete', move: { ...where, to: 'done', result: { pr: 1 }, exitCode: 0 }, result: { pr: 1 } },
    ],
    [
      'done without result → complete with null',
      { kind: 'done', step: 'agent' },
      { infraRetries: 0 },
      run,
      { kind: 'complete', move: { ...where, to: 'done', result: undefined, exitCode: 0 }, result: null },
    ],
    [
      'failed, attempts left → retry',
      { kind: 'failed', failedReason: 'command-failed', exitCode: 3, message: 'boom', step: 'agent' },
      { infraRetries: 0 },
      run,
      { kind: 'retry', move: { ...where, to: 'queued', verdict: 'command-failed', exitCode: 3, message: 'attempt 1 failed: boom; retrying' }, error: 'attempt 1 failed: boom' },
    ],
    [
      'failed on the last attempt → fail',
      { kind: 'failed', failedReason: 'timeout', message: 'slow', step: 'agent' },
      { infraRetries: 0 },
      { ...run, attempt: 2 },
      {
        kind: 'fail',
        move: { ...where, attempt: 2, to: 'failed', verdict: 'command-failed', failedReason: 'timeout', message: 'attempt 2 failed: slow' },
        error: 'attempt 2 failed: slow',
      },
    ],
    [
      'needs-human → block for a year',
      { kind: 'needs-human', reason: 'which branch?', exitCode: 75, step: 'agent' },
      { infraRetries: 0 },
      run,
      { kind: 'block', move: { ...where, to: 'blocked', blockedReason: 'needs-human', exitCode: 75, message: 'which branch?', retryAt: NOW + NEEDS_HUMAN_HOLD_MS } },
    ],
    [
      'sandbox-dead within budget → block, spend one, mark dead',
      { kind: 'sandbox-dead', observedExitCode: 137, message: 'killed', step: 'agent' },
      { infraRetries: 1 },
      run,
      {
        kind: 'block',
        move: {
          ...where,
          to: 'blocked',
          verdict: 'sandbox-dead',
          observedExitCode: 137,
          blockedReason: 'sandbox-dead',
          infraRetries: 2,
          message: 'killed',
          retryAt: NOW + SANDBOX_DEAD_BACKSTOP_MS,
        },
        markDead: { observedExitCode: 137, message: 'killed' },
      },
    ],
    [
      'sandbox-dead past budget → fail infra, mark dead',
      { kind: 'sandbox-dead', observedExitCode: 'unknown', message: 'gone', step: 'agent' },
      { infraRetries: 2 },
      run,
      {
        kind: 'fail',
        move: {
          ...where,
          to: 'failed',
          verdict: 'sandbox-dead',
          observedExitCode: 'unknown',
          failedReason: 'infra',
          message: 'infra retry budget exhausted (2 of 2 used); last: gone',
        },
        error: 'infra retries exhausted: gone',
        markDead: { observedExitCode: 'unknown', message: 'gone' },
      },
    ],
    [
      'provider-outage with an open breaker → block until it reopens',
      { kind: 'provider-outage', message: 'down', step: 'agent', breakerRetryAt: NOW + 5 },
      { infraRetries: 0 },
      run,
      { kind: 'block', move: { ...where, to: 'blocked', blockedReason: 'provider-outage', verdict: 'provider-outage', message: 'down', retryAt: NOW + 5 } },
    ],
    [
      'provider-outage, breaker closed → block for openMs',
      { kind: 'provider-outage', message: 'down', step: 'agent' },
      { infraRetries: 0 },
      run,
      { kind: 'block', move: { ...where, to: 'blocked', blockedReason: 'provider-outage', verdict: 'provider-outage', message: 'down', retryAt: NOW + 7_000 } },
    ],
    [
      'no sandbox → block until the slot says',
      { kind: 'no-sandbox', retryAt: NOW + 9, reason: 'breaker open' },
      { infraRetries: 0 },
      { attempt: 1, maxAttempts: 2, slot: 'w-l-0' },
      {
        kind: 'block',
        move: { attempt: 1, slot: 'w-l-0', to: 'blocked', blockedReason: 'provider-outage', verdict: 'provider-outage', message: 'breaker open', retryAt: NOW + 9 },
      },
    ],
    [
      'misconfigured lane → blocked needs-human, no breaker, no attempt',
      { kind: 'misconfigured', reason: 'secret gh missing' },
      { infraRetries: 0 },
      { attempt: 1, maxAttempts: 2, slot: 'w-l-0' },
      { kind: 'block', move: { attempt: 1, slot: 'w-l-0', to: 'blocked', blockedReason: 'needs-human', message: 'secret gh missing', retryAt: NOW + NEEDS_HUMAN_HOLD_MS } },
    ],
    [
      'cancel → cancelled',
      { kind: 'stopped', reason: 'cancel', step: 'agent' },
      { infraRetries: 0 },
      run,
      { kind: 'cancel', move: { ...where, to: 'cancelled', message: 'cancelled during agent' } },
    ],
    [
      'shutdown → hand back, no attempt spent',
      { kind: 'stopped', reason: 'shutdown', step: 'agent' },
      { infraRetries: 0 },
      run,
      { kind: 'hand-back', move: { ...where, to: 'queued', message: 'handed back on shutdown' } },
    ],
    [
      'interrupted (exec transport failed, sandbox answers) → re-run, no attempt spent, one infra retry',
      { kind: 'interrupted', message: 'router dropped', step: 'agent' },
      { infraRetries: 0 },
      run,
      { kind: 'hand-back', move: { ...where, to: 'queued', infraRetries: 1, message: 're-run, no attempt spent: router dropped' } },
    ],
    [
      'interrupted past the infra budget → fail infra',
      { kind: 'interrupted', message: 'router dropped', step: 'agent' },
      { infraRetries: 2 },
      run,
      {
        kind: 'fail',
        move: { ...where, to: 'failed', failedReason: 'infra', message: 'infra retry budget exhausted (2 of 2 used); last: router dropped' },
        error: 'infra retries exhausted: router dropped',
      },
    ],
    ['fenced → discard: no move at all', { kind: 'fenced', reason: 'lock lost' }, { infraRetries: 0 }, run, { kind: 'discard', reason: 'lock lost' }],
    [
      'crash budget spent → failed as infra',
      { kind: 'crash-budget-spent', reason: '6 runs vanished' },
      { infraRetries: 0 },
      run,
      { kind: 'fail', move: { ...where, to: 'failed', failedReason: 'infra', message: '6 runs vanished' }, error: '6 runs vanished' },
    ],
  ])('%s', (_name, outcome, record, context, expected) => {
    expect(decideCard(outcome, record, lane, NOW, context)).toEqual(expected);
  });
});

describe('withCancelReason', () => {
  const cancel: Extract<CardAction, { kind: 'cancel' }> = { kind: 'cancel', move: { attempt: 1, slot: 's', to: 'cancelled', message: 'cancelled during agent' } };
  it.each<[string, string | undefined, string]>([
    ['a plain cancel says nothing more', undefined, 'cancelled during agent'],
    ['a cancel asked for by a newer card of its supersede key says so', 'superseded by c3', 'cancelled during agent: superseded by c3'],
  ])('%s', (_name, reason, message) => {
    expect(withCancelReason(cancel, reason).move.message).toBe(message);
  });
});
