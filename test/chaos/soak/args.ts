import { parseArgs } from 'node:util';
import { z } from 'zod';

const Int = (min: number) => z.coerce.number().int().min(min);
/** The lane's `maxRunningPerKey` with keyed cards and no --max-running-per-key: one at a time, the strictest. */
export const DEFAULT_MAX_RUNNING_PER_KEY = 1;
/** A fraction of the cards, in [0, 1]. */
const Share = z.coerce.number().min(0).max(1);

/**
 * Soak settings, validated once. Defaults are the issue's acceptance figures scaled to the run:
 * lock 4 s and heartbeat 500 ms as in the issue; outages and the partition last 6 s, which outlasts
 * both the lock and the heartbeat timeout (2 × heartbeat).
 */
export const SoakArgsSchema = z
  .object({
    cards: Int(1).default(200),
    minutes: z.coerce.number().positive().default(3),
    seed: Int(0).default(1),
    workers: Int(2).default(2),
    slots: Int(1).default(2),
    lockMs: Int(1_000).default(4_000),
    heartbeatMs: Int(50).default(500),
    /** Redis down and the partition: longer than the lock and the heartbeat timeout. */
    outageMs: Int(1).default(6_000),
    /** A killed worker comes back after this; long enough for BullMQ to see its cards stall. */
    restartDelayMs: Int(0).default(2_000),
    /** Agent work per run, drawn per card from the seed. */
    workMinMs: Int(0).default(500),
    workMaxMs: Int(0).default(3_000),
    /** How long the cards may take to settle after the last fault before the unfinished ones count as lost. */
    settleSeconds: Int(1).default(120),
    /** Fault counts; unset ones scale with the run (see `resolveCounts`). */
    sandboxKills: Int(0).optional(),
    workerKills: Int(0).optional(),
    drains: Int(0).optional(),
    redisKills: Int(0).optional(),
    partitions: Int(0).optional(),
    createFailureWindows: Int(0).optional(),
    cancels: Int(0).optional(),
    /**
     * Sentinel failovers (kill -9 of the primary, a replica promoted). With any, the soak's Redis is
     * a Sentinel group (primary, replica, three sentinels) and every stack process connects through
     * the sentinels. Not scaled with the run: 0 unless given.
     */
    failovers: Int(0).default(0),
    /**
     * The sentinels' `down-after-milliseconds` (with failovers). Unset: 1 s, or the outage plus 4 s
     * when Redis kills are planned too, so that a Redis kill (the primary down for --outage-ms and
     * restarted from its AOF) stays a restart and is not turned into a failover (see `checkSentinelArgs`).
     */
    downAfterMs: Int(100).optional(),
    /** Creates that fail in one window (the breaker opens at 5 by default). */
    createFailures: Int(1).default(3),
    /**
     * The share of cards given a `concurrencyKey` from a pool of `concurrencyKeys` keys (README
     * "Fair per-key concurrency"); with any, the soak's lane gets `maxRunningPerKey`. 0: none, and
     * the lane has no key limit.
     */
    keyedShare: Share.default(0),
    concurrencyKeys: Int(1).default(3),
    maxRunningPerKey: Int(1).max(10_000).optional(),
    /**
     * The share of cards posted as a few cards per `supersedeKey` in a row (2 to 4, README "One run
     * per PR"), some groups with `supersede: "cancel-running"`. 0: none.
     */
    supersedeShare: Share.default(0),
    netns: z.enum(['auto', 'on', 'off']).default('auto'),
    json: z.boolean().default(false),
    /** Keep the run directory (logs, ledger) for a post-mortem instead of removing it. */
    keep: z.boolean().default(false),
  })
  .refine((a) => a.workMaxMs >= a.workMinMs, { message: 'work-max-ms must be ≥ work-min-ms', path: ['workMaxMs'] })
  .refine((a) => a.keyedShare > 0 || a.maxRunningPerKey === undefined, { message: 'only with --keyed-share above 0 (no card has a key)', path: ['maxRunningPerKey'] })
  .transform((a) => ({ ...a, maxRunningPerKey: a.maxRunningPerKey ?? (a.keyedShare > 0 ? DEFAULT_MAX_RUNNING_PER_KEY : undefined) }));
export type SoakArgs = z.infer<typeof SoakArgsSchema>;

const FLAGS = [
  'cards',
  'minutes',
  'seed',
  'workers',
  'slots',
  'lock-ms',
  'heartbeat-ms',
  'outage-ms',
  'restart-delay-ms',
  'work-min-ms',
  'work-max-ms',
  'settle-seconds',
  'sandbox-kills',
  'worker-kills',
  'drains',
  'redis-kills',
  'partitions',
  'create-failure-windows',
  'cancels',
  'failovers',
  'down-after-ms',
  'create-failures',
  'keyed-share',
  'concurrency-keys',
  'max-running-per-key',
  'supersede-share',
  'netns',
] as const;

export const USAGE = `usage: npm run chaos -- [--cards N (200)] [--minutes M (3)] [--seed S (1)] [options]

  --workers N (2)  --slots N per worker (2)  --lock-ms (4000)  --heartbeat-ms (500)
  --outage-ms (6000)  Redis down / partition length   --restart-delay-ms (2000)
  --work-min-ms (500) --work-max-ms (3000)   agent work per run
  --settle-seconds (120)   after the last fault, cards still not terminal count as lost
  --sandbox-kills --worker-kills --drains --redis-kills --partitions --create-failure-windows --cancels N
  --failovers N (0)   Sentinel failovers: with any, Redis is a primary, a replica and 3 sentinels,
                      the stack connects through them, and each failover kill -9s the primary
                      (the replica is promoted; the old primary comes back as a replica of it)
  --down-after-ms (1000, or outage + 4000 with --redis-kills)   the sentinels' down-after-milliseconds;
                      with Redis kills it must exceed --outage-ms by 2000, so a Redis kill (the primary
                      restarted from its AOF) is a restart, not a failover
  --create-failures N (3)  creates that fail in one window
  --keyed-share F (0)   that share of the cards gets a concurrencyKey from a pool of
                      --concurrency-keys N (3) keys, and the lane --max-running-per-key N (1)
  --supersede-share F (0)   that share of the cards is posted as 2-4 cards per supersedeKey in a
                      row, about half of the keys with supersede "cancel-running"
  --netns auto|on|off (auto)   workers in their own network namespaces
  --json   print the result as JSON too     --keep   keep the run directory`;

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/** Parses argv; throws a readable error naming the flag. */
export function parseSoakArgs(argv: readonly string[]): SoakArgs {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      ...Object.fromEntries(FLAGS.map((f) => [f, { type: 'string' as const }])),
      json: { type: 'boolean' },
      keep: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) throw new SoakHelpRequested();
  const raw = Object.fromEntries(Object.entries(values).map(([k, v]) => [camel(k), v]));
  const parsed = SoakArgsSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `--${String(i.path[0] ?? '').replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}: ${i.message}`);
    throw new SoakUsageError(issues.join('; '));
  }
  checkSentinelArgs(parsed.data);
  return parsed.data;
}

/** A Redis kill restarts the primary this long before the sentinels would judge it down, at least. */
export const RESTART_BEFORE_DOWN_AFTER_MS = 2_000;
/** The default margin of `down-after-milliseconds` over the outage when both faults are planned. */
const DEFAULT_DOWN_AFTER_MARGIN_MS = 4_000;
/** Sentinel's down-after for a soak with failovers and no Redis kills: a failover in about 2-3 s. */
const DEFAULT_DOWN_AFTER_MS = 1_000;

/**
 * The sentinels' `down-after-milliseconds` for this run. A Redis kill under Sentinel kills the
 * primary and restarts it from its AOF on its port after the outage; if the sentinels judged it down
 * meanwhile they would promote the replica and the restarted node would be demoted, so the Redis
 * kill would be a second kind of failover. With Redis kills planned, down-after is therefore the
 * outage plus a margin, and a failover takes that long to start (plus an election, a second or two).
 */
export function downAfterMsOf(a: SoakArgs): number {
  if (a.downAfterMs !== undefined) return a.downAfterMs;
  return resolveCounts(a).redisKills > 0 ? a.outageMs + DEFAULT_DOWN_AFTER_MARGIN_MS : DEFAULT_DOWN_AFTER_MS;
}

/** Refuses a down-after that would turn the run's Redis kills into failovers. */
export function checkSentinelArgs(a: SoakArgs): void {
  if (a.failovers === 0) {
    if (a.downAfterMs !== undefined) throw new SoakUsageError('--down-after-ms: only with --failovers (without them there are no sentinels)');
    return;
  }
  const kills = resolveCounts(a).redisKills;
  const downAfter = downAfterMsOf(a);
  if (kills > 0 && downAfter < a.outageMs + RESTART_BEFORE_DOWN_AFTER_MS) {
    throw new SoakUsageError(
      `--down-after-ms: ${downAfter} ms would let the sentinels fail over during a Redis kill (the primary is down ${a.outageMs} ms, then restarted from its AOF as primary); give at least --outage-ms + ${RESTART_BEFORE_DOWN_AFTER_MS} (${a.outageMs + RESTART_BEFORE_DOWN_AFTER_MS}), or --redis-kills 0`,
    );
  }
}

export class SoakUsageError extends Error {}
export class SoakHelpRequested extends Error {}

export interface FaultCounts {
  sandboxKills: number;
  workerKills: number;
  drains: number;
  redisKills: number;
  partitions: number;
  createFailureWindows: number;
  cancels: number;
  failovers: number;
}

/**
 * Counts not given on the command line scale with the run: one sandbox kill per 20 cards (the
 * acceptance run's 100 for 2,000), one cancel per 50 cards, and at least one of every other fault
 * but failovers, which happen only when asked for (they need a Sentinel group).
 */
export function resolveCounts(a: SoakArgs): FaultCounts {
  const minutes = a.minutes;
  return {
    sandboxKills: a.sandboxKills ?? Math.max(1, Math.round(a.cards / 20)),
    workerKills: a.workerKills ?? Math.max(1, Math.floor(minutes / 6)),
    drains: a.drains ?? 1,
    redisKills: a.redisKills ?? Math.max(1, Math.floor(minutes / 8)),
    partitions: a.partitions ?? 1,
    createFailureWindows: a.createFailureWindows ?? 1,
    cancels: a.cancels ?? Math.max(1, Math.round(a.cards / 50)),
    failovers: a.failovers,
  };
}
