import { z } from 'zod';
import { ApiTokenConfigSchema } from './api-token.js';
import { CallbackSecretConfigSchema, callbackSecretEnvNames } from './callback-secret.js';
import { LaneNameSchema } from './card.js';
import { MaxRunningPerKeySchema } from './concurrency-key.js';
import { DEFAULT_SUPERSEDE_MODE, SupersedeModeSchema } from './supersede.js';
import * as D from './defaults.js';
import { DEFAULT_MAX_RESULT_BYTES, MAX_RESULT_BYTES_LIMIT } from './agent-limits.js';
import { FileSyncSchema } from './sandbox.js';

const Argv = z.array(z.string()).min(1, 'must name a program');
const Ms = z.number().int().positive();

/** Faults the `faulty` provider injects; for tests and demos only. */
export const FaultPlanSchema = z.strictObject({
  /** The sandbox dies (its root is killed) when this many commands have started in it. */
  dieAfterCommands: z.number().int().positive().optional(),
  /** Every Nth command returns a bare exit 1; `dead` also kills the sandbox so poll() says exited(137). */
  bareExit1Every: z.number().int().positive().optional(),
  bareExit1Mode: z.enum(['dead', 'live', 'exited-0']).default('dead'),
  /** The next N creates fail with a provider error. */
  createFailures: z.number().int().nonnegative().default(0),
  /** The next N creates hang until their connect deadline. */
  connectTimeouts: z.number().int().nonnegative().default(0),
  /** poll() throws a provider error. */
  pollErrors: z.boolean().default(false),
  /** Commands hang until cancelled. */
  hang: z.boolean().default(false),
  /**
   * Only commands of these cards (LANES_CARD_ID in the command's env) are faulted and counted by
   * the command faults above; unset means every command. Create and poll faults are not per card.
   */
  targetCards: z.array(z.string().min(1)).optional(),
});
export type FaultPlan = z.infer<typeof FaultPlanSchema>;
/** A plan as written (defaults not yet applied), e.g. for `FaultyProvider.setPlan`. */
export type FaultPlanInput = z.input<typeof FaultPlanSchema>;

export const BreakerConfigSchema = z.strictObject({
  failureThreshold: z.number().int().positive().default(D.DEFAULT_BREAKER_FAILURE_THRESHOLD),
  windowMs: Ms.default(D.DEFAULT_BREAKER_WINDOW_MS),
  openMs: Ms.default(D.DEFAULT_BREAKER_OPEN_MS),
});
export type BreakerConfig = z.infer<typeof BreakerConfigSchema>;

export const RespawnConfigSchema = z.strictObject({
  baseDelayMs: z.number().int().nonnegative().default(D.DEFAULT_RESPAWN_BASE_DELAY_MS),
  maxDelayMs: z.number().int().nonnegative().default(D.DEFAULT_RESPAWN_MAX_DELAY_MS),
  windowMs: Ms.default(D.DEFAULT_RESPAWN_WINDOW_MS),
});
export type RespawnConfig = z.infer<typeof RespawnConfigSchema>;

/** How one worker's slots follow the queue (see evaluateSlotScaling). */
export const SlotScalingConfigSchema = z.strictObject({
  /** After any slot change, no further change for this long: new sandboxes start and the counts catch up. */
  cooldownMs: z.number().int().nonnegative().default(D.DEFAULT_SLOT_SCALE_COOLDOWN_MS),
  /** Idle slots are removed only once the surplus has lasted this long (the hysteresis). */
  downDelayMs: z.number().int().nonnegative().default(D.DEFAULT_SLOT_SCALE_DOWN_DELAY_MS),
});
export type SlotScalingConfig = z.infer<typeof SlotScalingConfigSchema>;

/**
 * How a local lane fences its agents (README "Threat model"):
 * - `separate-uid`: each sandbox runs as an unprivileged uid of its own, in its own PID namespace,
 *   its card directories owned by that uid and closed to everyone else. For untrusted agents.
 * - `pid-namespace`: its own PID namespace, as the worker's own user. Trusted agents only.
 * - `process-group`: a process group, as the worker's own user. Trusted agents only.
 * - `auto`: the strongest this machine allows, said at boot and in `GET /v1/lanes`.
 */
export const IsolationSettingSchema = z.enum(['auto', 'separate-uid', 'pid-namespace', 'process-group']);
export type IsolationSetting = z.infer<typeof IsolationSettingSchema>;

/**
 * Environment variables that are lanes' own credentials or control: a local lane may not map them
 * into its agents as `secrets` (DESIGN: no secret of the stack reaches an agent).
 */
export const STACK_ENV_PATTERN =
  /^(REDIS_(URL|SENTINELS|SENTINEL_NAME|USERNAME|PASSWORD|SENTINEL_USERNAME|SENTINEL_PASSWORD|TLS|DB)|LANES_API_TOKENS?|LANES_CALLBACK_SECRET.*|LANES_CONFIG|MODAL_TOKEN_ID|MODAL_TOKEN_SECRET|NODE_OPTIONS)$/;
/** How long lanes keeps what a lane's cards leave behind. */
export const RetentionConfigSchema = z.strictObject({
  /**
   * A card that ended (done, failed, cancelled) expires this long after its terminal move, with its
   * history, its indexes and its BullMQ job. A positive number; fractions are allowed (0.5 is 12 h,
   * 2 / 86400 is two seconds, as tests use).
   */
  terminalCardDays: z.number().positive().max(3_650).default(D.DEFAULT_TERMINAL_CARD_RETENTION_DAYS),
  /** At most this many finished cards are kept; past it, the oldest go first, before their days are up (DEFAULT_RETAINED_CARDS_MAX). */
  maxCards: z.number().int().positive().max(D.RETAINED_CARDS_MAX_LIMIT).default(D.DEFAULT_RETAINED_CARDS_MAX),
});
export type RetentionConfig = z.infer<typeof RetentionConfigSchema>;

/** A lane's terminal-card retention in milliseconds (at least 1), as the transition script sets it. */
export function terminalRetentionMs(retention: Partial<RetentionConfig> | undefined): number {
  return Math.max(1, Math.round((retention?.terminalCardDays ?? D.DEFAULT_TERMINAL_CARD_RETENTION_DAYS) * D.MS_PER_DAY));
}

export const LaneConfigSchema = z
  .strictObject({
    name: LaneNameSchema,
    provider: z.enum(['local', 'modal']).default('local'),
    /** Most slots one worker process hosts; default maxSlots when that is given, else 1. */
    slots: z.number().int().positive().max(256).optional(),
    minSlots: z.number().int().nonnegative().max(256).optional(),
    maxSlots: z.number().int().positive().max(256).optional(),
    image: z.string().min(1).default('debian:bookworm-slim'),
    setup: z.array(Argv).default([]),
    agent: Argv,
    env: z.record(z.string(), z.string()).default({}),
    /** Modal: names of Modal Secrets. Local: names of the worker's environment variables handed to the agent (never lanes' own). */
    secrets: z.array(z.string().min(1)).default([]),
    /** Local lanes only; see IsolationSettingSchema. */
    isolation: IsolationSettingSchema.default('auto'),
    /** result.json and blocked.json are read up to this many bytes; a larger one fails the card naming the file. */
    maxResultBytes: z.number().int().positive().max(MAX_RESULT_BYTES_LIMIT).default(DEFAULT_MAX_RESULT_BYTES),
    files: z.array(FileSyncSchema).default([]),
    commandTimeoutMs: Ms.default(D.DEFAULT_COMMAND_TIMEOUT_MS),
    setupTimeoutMs: Ms.default(D.DEFAULT_SETUP_TIMEOUT_MS),
    connectTimeoutMs: Ms.default(D.DEFAULT_CONNECT_TIMEOUT_MS),
    canaryTimeoutMs: Ms.default(D.DEFAULT_CANARY_TIMEOUT_MS),
    killGraceMs: Ms.default(D.DEFAULT_KILL_GRACE_MS),
    /** The lifetime each sandbox is created with; the provider ends it then (Modal's maximum, 24 h). */
    sandboxLifetimeMs: Ms.max(D.DEFAULT_SANDBOX_LIFETIME_MS).default(D.DEFAULT_SANDBOX_LIFETIME_MS),
    /** A sandbox this old is replaced between cards: a `sandbox.recycled`, not a death. */
    sandboxRecycleAfterMs: Ms.default(D.DEFAULT_SANDBOX_RECYCLE_AFTER_MS),
    /** An idle slot above minSlots releases its sandbox after this long; `minSlots: 0` then holds no sandbox when idle. */
    idleReleaseMs: Ms.default(D.DEFAULT_IDLE_RELEASE_MS),
    attempts: z.number().int().positive().max(100).default(D.DEFAULT_ATTEMPTS),
    infraRetries: z.number().int().nonnegative().max(100).default(D.DEFAULT_INFRA_RETRIES),
    breaker: BreakerConfigSchema.default(() => BreakerConfigSchema.parse({})),
    respawn: RespawnConfigSchema.default(() => RespawnConfigSchema.parse({})),
    slotScaling: SlotScalingConfigSchema.default(() => SlotScalingConfigSchema.parse({})),
    retention: RetentionConfigSchema.default(() => RetentionConfigSchema.parse({})),
    faults: FaultPlanSchema.optional(),
    /** At most this many cards of one `concurrencyKey` run at once across the lane's workers; unset: no key limit. */
    maxRunningPerKey: MaxRunningPerKeySchema.optional(),
    /** Whether a newer card of a `supersedeKey` cancels a running earlier one too (`cancel-running`), or only one not yet started. A card's own `supersede` wins. */
    supersede: SupersedeModeSchema.default(DEFAULT_SUPERSEDE_MODE),
    /** Open cards (queued, running or blocked) at which a POST adding more is refused, 429 LANE_FULL (DEFAULT_MAX_OPEN_CARDS). */
    maxOpenCards: z.number().int().positive().max(D.MAX_OPEN_CARDS_LIMIT).default(D.DEFAULT_MAX_OPEN_CARDS),
    /** Card JSON bytes the open cards may hold at which a POST adding more is refused, 429 LANE_FULL (DEFAULT_MAX_OPEN_BYTES). */
    maxOpenBytes: z.number().int().positive().max(D.MAX_OPEN_BYTES_LIMIT).default(D.DEFAULT_MAX_OPEN_BYTES),
    /** The lane's own callback secret (its board's alone); unset: LANES_CALLBACK_SECRET signs its callbacks. */
    callbackSecret: CallbackSecretConfigSchema.optional(),
  })
  .transform((lane) => {
    // Given only `slots`, the lane is fixed: min = max = slots (a worker never adds or drops slots).
    const slots = lane.slots ?? lane.maxSlots ?? D.DEFAULT_SLOTS;
    return { ...lane, slots, minSlots: lane.minSlots ?? Math.min(slots, lane.maxSlots ?? slots), maxSlots: lane.maxSlots ?? Math.max(slots, lane.minSlots ?? 0) };
  })
  .superRefine((lane, ctx) => {
    if (lane.provider === 'local') {
      lane.secrets.forEach((name, i) => {
        if (STACK_ENV_PATTERN.test(name)) ctx.addIssue({ code: 'custom', path: ['secrets', i], message: `${name} is a credential of lanes itself and never reaches an agent` });
      });
    } else if (lane.isolation !== 'auto') {
      ctx.addIssue({ code: 'custom', path: ['isolation'], message: 'applies to local lanes only (a Modal sandbox is its own machine)' });
    }
    if (lane.minSlots > lane.maxSlots) {
      ctx.addIssue({ code: 'custom', path: ['minSlots'], message: `must be ≤ maxSlots (${lane.maxSlots})` });
      return;
    }
    if (lane.sandboxRecycleAfterMs > lane.sandboxLifetimeMs) {
      ctx.addIssue({ code: 'custom', path: ['sandboxRecycleAfterMs'], message: `must be ≤ sandboxLifetimeMs (${lane.sandboxLifetimeMs})` });
    }
    // A card that could outlast any sandbox would recycle sandbox after sandbox and never start.
    const cardMs = cardTimeoutMsOf(lane);
    if (cardMs >= lane.sandboxLifetimeMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['commandTimeoutMs'],
        message: `with the setup commands' timeouts (${cardMs} ms in all) must be < sandboxLifetimeMs (${lane.sandboxLifetimeMs})`,
      });
    }
    if (lane.minSlots > lane.slots) {
      ctx.addIssue({ code: 'custom', path: ['minSlots'], message: `must be ≤ slots (${lane.slots})` });
    }
    if (lane.maxSlots < lane.slots) {
      ctx.addIssue({ code: 'custom', path: ['maxSlots'], message: `must be ≥ slots (${lane.slots})` });
    }
  });
/** The longest a card's commands may run in one sandbox: each setup command's timeout, then the agent's. */
export function cardTimeoutMsOf(lane: Pick<z.infer<typeof LaneConfigSchema>, 'setup' | 'setupTimeoutMs' | 'commandTimeoutMs'>): number {
  return lane.setup.length * lane.setupTimeoutMs + lane.commandTimeoutMs;
}
export type LaneConfigInput = z.input<typeof LaneConfigSchema>;
export type LaneConfig = z.infer<typeof LaneConfigSchema>;

export const LanesConfigSchema = z
  .strictObject({
    lanes: z.array(LaneConfigSchema).min(1, 'needs at least one lane'),
    /** Scoped API tokens (beside LANES_API_TOKENS, which are admin tokens over every lane). */
    tokens: z.array(ApiTokenConfigSchema).optional(),
  })
  .superRefine((cfg, ctx) => {
    const seen = new Set<string>();
    cfg.lanes.forEach((lane, i) => {
      if (seen.has(lane.name)) {
        ctx.addIssue({ code: 'custom', path: ['lanes', i, 'name'], message: `duplicate lane "${lane.name}"` });
      }
      seen.add(lane.name);
    });
    // A token's or a callback secret's variable is in the worker's environment too: no lane may hand it to its agents.
    const held = new Map<string, string>();
    for (const token of cfg.tokens ?? []) if (token.fromEnv !== undefined) held.set(token.fromEnv, `API token "${token.name}"`);
    for (const lane of cfg.lanes) for (const name of callbackSecretEnvNames(lane.callbackSecret)) held.set(name, `lane ${lane.name}'s callback secret`);
    cfg.lanes.forEach((lane, i) => {
      if (lane.provider !== 'local') return;
      lane.secrets.forEach((name, j) => {
        const what = held.get(name);
        if (what) ctx.addIssue({ code: 'custom', path: ['lanes', i, 'secrets', j], message: `${name} holds ${what} and never reaches an agent` });
      });
    });
    const names = new Set<string>();
    cfg.tokens?.forEach((token, i) => {
      if (names.has(token.name)) ctx.addIssue({ code: 'custom', path: ['tokens', i, 'name'], message: `duplicate token name "${token.name}"` });
      names.add(token.name);
      if (token.lanes === '*') return;
      token.lanes.forEach((lane, j) => {
        if (!seen.has(lane)) ctx.addIssue({ code: 'custom', path: ['tokens', i, 'lanes', j], message: `unknown lane "${lane}"` });
      });
    });
  });
export type LanesConfigInput = z.input<typeof LanesConfigSchema>;
export type LanesConfig = z.infer<typeof LanesConfigSchema>;
