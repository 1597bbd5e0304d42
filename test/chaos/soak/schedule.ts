import type { FaultCounts, SoakArgs } from './args.js';
import { seededRandom, shuffle } from './rng.js';

/** Faults that disturb the whole fleet run one at a time, in their own stretch of the run. */
export type FleetFaultKind = 'worker-kill' | 'worker-drain' | 'redis-kill' | 'partition' | 'create-failures' | 'failover';
/** Fleet faults aimed at Redis rather than at a worker. */
export const REDIS_FAULTS: ReadonlySet<FaultKind> = new Set<FaultKind>(['redis-kill', 'failover']);
export type FaultKind = FleetFaultKind | 'sandbox-kill' | 'cancel';

export interface PlannedFault {
  kind: FaultKind;
  /** Offset from the start of the run. */
  atMs: number;
  /** A number in [0, 1) that picks the victim among those present when the fault fires. */
  pick: number;
  /** For faults aimed at a worker: which one (they take turns, from a seeded first). */
  worker?: number;
}

export interface PlannedCard {
  id: string;
  atMs: number;
  /** How long the agent works on this card (every run of it). */
  workMs: number;
  /** With --keyed-share: limited by the lane's `maxRunningPerKey` (README "Fair per-key concurrency"). */
  concurrencyKey?: string;
  /** With --supersede-share: one of a few cards of this key posted in a row; the last is the key's newest (README "One run per PR"). */
  supersedeKey?: string;
  /** Unset: the lane's (`queued`). */
  supersede?: 'cancel-running';
}

export interface SoakPlan {
  cards: PlannedCard[];
  /** Sorted by `atMs`. */
  faults: PlannedFault[];
  runMs: number;
}

/** Cards arrive over the first 80 % of the run, so there is work in flight during every fault. */
const ENQUEUE_SPAN = 0.8;
/** Faults fall between 10 % and 85 % of the run: after warm-up, and with time left to recover. */
const FAULT_FROM = 0.1;
const FAULT_TO = 0.85;

/**
 * The whole run, decided from the seed before anything starts. Fleet faults get equal stretches of
 * the fault window in a seeded order, each at a seeded offset inside its stretch; sandbox kills and
 * cancels fall anywhere in it while cards still arrive. Victims are picked when a fault fires (by `pick`), since
 * which sandbox is busy then depends on the run.
 */
export function planSoak(
  args: Pick<SoakArgs, 'cards' | 'minutes' | 'seed' | 'workMinMs' | 'workMaxMs' | 'workers'> & Partial<Pick<SoakArgs, 'keyedShare' | 'concurrencyKeys' | 'supersedeShare'>>,
  counts: FaultCounts,
): SoakPlan {
  const random = seededRandom(args.seed);
  const runMs = Math.round(args.minutes * 60_000);
  const cards: PlannedCard[] = [];
  for (let i = 0; i < args.cards; i++) {
    cards.push({
      id: `soak-${args.seed}-${String(i).padStart(5, '0')}`,
      atMs: Math.floor((i / args.cards) * runMs * ENQUEUE_SPAN),
      workMs: Math.round(args.workMinMs + random() * (args.workMaxMs - args.workMinMs)),
    });
  }
  const fleetKinds: FleetFaultKind[] = shuffle(
    [
      ...Array<FleetFaultKind>(counts.workerKills).fill('worker-kill'),
      ...Array<FleetFaultKind>(counts.drains).fill('worker-drain'),
      ...Array<FleetFaultKind>(counts.redisKills).fill('redis-kill'),
      ...Array<FleetFaultKind>(counts.partitions).fill('partition'),
      ...Array<FleetFaultKind>(counts.createFailureWindows).fill('create-failures'),
      ...Array<FleetFaultKind>(counts.failovers).fill('failover'),
    ],
    random,
  );
  const from = runMs * FAULT_FROM;
  const span = runMs * (FAULT_TO - FAULT_FROM);
  const stretch = fleetKinds.length ? span / fleetKinds.length : span;
  const firstWorker = Math.floor(random() * args.workers);
  let aimed = 0;
  const faults: PlannedFault[] = fleetKinds.map((kind, i) => ({
    kind,
    // The first third of its stretch, so the fault has the rest to play out before the next one.
    atMs: Math.round(from + i * stretch + random() * stretch * 0.33),
    pick: random(),
    ...(REDIS_FAULTS.has(kind) ? {} : { worker: (firstWorker + aimed++) % args.workers }),
  }));
  // Sandbox kills and cancels need busy slots and queued cards: they fall while cards still arrive.
  const cardSpan = runMs * (ENQUEUE_SPAN - FAULT_FROM);
  const anywhere = (kind: FaultKind, n: number) => {
    for (let i = 0; i < n; i++) faults.push({ kind, atMs: Math.round(from + random() * cardSpan), pick: random() });
  };
  anywhere('sandbox-kill', counts.sandboxKills);
  anywhere('cancel', counts.cancels);
  faults.sort((a, b) => a.atMs - b.atMs);
  assignKeys(cards, args);
  return { cards, faults, runMs };
}

/** Supersede keys come in groups of this many cards posted in a row (the last of a plan's may be shorter). */
const SUPERSEDE_GROUP = { min: 2, max: 4 } as const;
/** The key stream's seed, apart from the plan's, so a plan without keys draws exactly as before. */
const KEY_SEED_SALT = 0x6b_65_79;

/**
 * Gives round(keyedShare × cards) seeded cards a concurrency key of a pool, and lays groups of 2-4
 * consecutive cards (round(supersedeShare × cards) in all) at seeded places, one supersede key per
 * group, about half of them `cancel-running`. Consecutive cards arrive a few hundred ms apart, so a
 * newer card of a key finds the earlier one queued, waiting or running. A card may have both keys.
 */
export function assignKeys(cards: PlannedCard[], a: Partial<Pick<SoakArgs, 'seed' | 'keyedShare' | 'concurrencyKeys' | 'supersedeShare'>>): void {
  const random = seededRandom((a.seed ?? 0) ^ KEY_SEED_SALT);
  const keyed = Math.round((a.keyedShare ?? 0) * cards.length);
  for (const i of shuffle(
    cards.map((_, i) => i),
    random,
  ).slice(0, keyed))
    cards[i]!.concurrencyKey = `soak/repo-${Math.floor(random() * (a.concurrencyKeys ?? 1))}`;
  let left = Math.round((a.supersedeShare ?? 0) * cards.length);
  const groups: number[] = [];
  while (left > 0) {
    const size = Math.min(left, SUPERSEDE_GROUP.min + Math.floor(random() * (SUPERSEDE_GROUP.max - SUPERSEDE_GROUP.min + 1)));
    groups.push(size);
    left -= size;
  }
  // Each group goes before one of the free cards (or after the last): sorted seeded places.
  const free = cards.length - groups.reduce((n, g) => n + g, 0);
  const places = groups.map(() => Math.floor(random() * (free + 1))).sort((x, y) => x - y);
  let i = 0;
  let passed = 0;
  groups.forEach((size, g) => {
    i += places[g]! - passed;
    passed = places[g]!;
    const cancelRunning = random() < 0.5;
    for (const c of cards.slice(i, i + size)) {
      c.supersedeKey = `soak/repo#${g}`;
      if (cancelRunning) c.supersede = 'cancel-running';
    }
    i += size;
  });
}
