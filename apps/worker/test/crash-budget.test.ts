import { describe, expect, it } from 'vitest';
import { evaluateCrashBudget } from '../src/index.js';

describe('evaluateCrashBudget', () => {
  it.each([
    [0, 5, 'run'],
    [5, 5, 'run'],
    [6, 5, 'fail'],
    [1, 0, 'fail'],
    [0, 0, 'run'],
  ] as const)('%i vanished runs, budget %i → %s', (suspects, budget, action) => {
    expect(evaluateCrashBudget({ crashSuspects: suspects }, { crashedRunsBudget: budget }).action).toBe(action);
  });
});
