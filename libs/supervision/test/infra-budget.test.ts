import { describe, expect, it } from 'vitest';
import { evaluateInfraRetry } from '@lanes/supervision';

describe('evaluateInfraRetry', () => {
  it.each<[number, number, 'block' | 'fail', number]>([
    // budget 3: infra failures 1, 2, 3 block; the 4th fails
    [0, 3, 'block', 1],
    [1, 3, 'block', 2],
    [2, 3, 'block', 3], // budget − 1 spent: the last block
    [3, 3, 'fail', 3], // budget spent: the 4th infra failure fails the card
    [4, 3, 'fail', 4],
    [0, 0, 'fail', 0], // no budget: the first infra failure fails
    [0, 1, 'block', 1],
    [1, 1, 'fail', 1],
  ])('%i spent of %i → %s', (spent, budget, action, infraRetries) => {
    const d = evaluateInfraRetry({ infraRetries: spent }, budget);
    expect(d.action).toBe(action);
    expect(d.infraRetries).toBe(infraRetries);
    if (d.action === 'fail') expect(d.failedReason).toBe('infra');
    expect(d.reason).toBeTruthy();
  });

  it('walks a card through budget 3', () => {
    let card = { infraRetries: 0 };
    const actions: string[] = [];
    for (let failure = 1; failure <= 4; failure++) {
      const d = evaluateInfraRetry(card, 3);
      actions.push(d.action);
      card = { infraRetries: d.infraRetries };
    }
    expect(actions).toEqual(['block', 'block', 'block', 'fail']);
  });
});
