import { describe, expect, it } from 'vitest';
import { parseSoakArgs, resolveCounts } from './args.js';
import { planSoak, REDIS_FAULTS } from './schedule.js';

const ACCEPTANCE = [
  '--cards',
  '400',
  '--minutes',
  '5',
  '--workers',
  '3',
  '--slots',
  '1',
  '--sandbox-kills',
  '40',
  '--worker-kills',
  '1',
  '--redis-kills',
  '2',
  '--partitions',
  '2',
  '--failovers',
  '1',
  '--seed',
  '26',
];

describe('planSoak: failovers', () => {
  it('plans none by default, and the plan of a seed without failovers is as it was', () => {
    const args = parseSoakArgs(['--cards', '60', '--minutes', '1', '--seed', '11']);
    const plan = planSoak(args, resolveCounts(args));
    expect(plan.faults.some((f) => f.kind === 'failover')).toBe(false);
    // --failovers 0 given explicitly is the same plan: the seed's draws are unchanged.
    const explicit = parseSoakArgs(['--cards', '60', '--minutes', '1', '--seed', '11', '--failovers', '0']);
    expect(planSoak(explicit, resolveCounts(explicit))).toEqual(plan);
  });

  it('gives each failover a stretch of its own among the fleet faults, aimed at Redis (no worker), inside the fault window', () => {
    const args = parseSoakArgs(ACCEPTANCE);
    const plan = planSoak(args, resolveCounts(args));
    const fleet = plan.faults.filter((f) => f.kind !== 'sandbox-kill' && f.kind !== 'cancel');
    expect(fleet.map((f) => f.kind).sort()).toEqual(['create-failures', 'failover', 'partition', 'partition', 'redis-kill', 'redis-kill', 'worker-drain', 'worker-kill']);
    const failover = fleet.find((f) => f.kind === 'failover')!;
    expect(failover.worker).toBeUndefined();
    expect(failover.atMs).toBeGreaterThanOrEqual(0.1 * plan.runMs);
    expect(failover.atMs).toBeLessThan(0.85 * plan.runMs);
    // One stretch each: fleet faults are at least two thirds of a stretch apart.
    const stretch = (0.75 * plan.runMs) / fleet.length;
    const at = fleet.map((f) => f.atMs).sort((a, b) => a - b);
    for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThan(stretch * 0.66);
    for (const f of fleet) {
      if (REDIS_FAULTS.has(f.kind)) expect(f.worker).toBeUndefined();
      else expect(f.worker).toBeTypeOf('number');
    }
  });

  it('plans as many failovers as asked for', () => {
    const args = parseSoakArgs([...ACCEPTANCE, '--failovers', '3']);
    expect(planSoak(args, resolveCounts(args)).faults.filter((f) => f.kind === 'failover')).toHaveLength(3);
  });
});

describe('planSoak: keyed and supersede cards', () => {
  const base = ['--cards', '60', '--minutes', '1', '--seed', '11'];
  const planOf = (argv: string[]) => {
    const args = parseSoakArgs(argv);
    return planSoak(args, resolveCounts(args));
  };

  it('without the flags gives no card a key; with them, the cards, their times and work and the faults are as without', () => {
    const plain = planOf(base);
    expect(plain.cards.some((c) => c.concurrencyKey || c.supersedeKey || c.supersede)).toBe(false);
    const keyed = planOf([...base, '--keyed-share', '0.3', '--supersede-share', '0.2']);
    expect(keyed.faults).toEqual(plain.faults);
    expect(keyed.cards.map(({ id, atMs, workMs }) => ({ id, atMs, workMs }))).toEqual(plain.cards.map(({ id, atMs, workMs }) => ({ id, atMs, workMs })));
  });

  it('keys that share of the cards from the pool, and lays supersede keys as groups of 2-4 cards in a row', () => {
    const { cards } = planOf([...base, '--keyed-share', '0.3', '--supersede-share', '0.2', '--concurrency-keys', '3']);
    const keyed = cards.filter((c) => c.concurrencyKey);
    expect(keyed).toHaveLength(18);
    expect(new Set(keyed.map((c) => c.concurrencyKey)).size).toBeLessThanOrEqual(3);
    const superseding = cards.filter((c) => c.supersedeKey);
    expect(superseding).toHaveLength(12);
    const groups = new Map<string, number[]>();
    cards.forEach((c, i) => {
      if (c.supersedeKey) groups.set(c.supersedeKey, [...(groups.get(c.supersedeKey) ?? []), i]);
    });
    for (const [, at] of groups) {
      // In a row, and one mode per group.
      expect(at.at(-1)! - at[0]!).toBe(at.length - 1);
      expect(at.length).toBeLessThanOrEqual(4);
      expect(new Set(at.map((i) => cards[i]!.supersede)).size).toBe(1);
    }
    expect([...groups.values()].filter((at) => at.length < 2).length).toBeLessThanOrEqual(1);
  });

  it('is the same plan for the same seed', () => {
    const argv = [...base, '--keyed-share', '0.5', '--supersede-share', '0.5'];
    expect(planOf(argv)).toEqual(planOf(argv));
  });
});
