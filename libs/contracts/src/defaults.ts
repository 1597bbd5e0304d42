/** Every timing default lives here once; units are in the names. */

/** DESIGN.md example: an agent gets half an hour per command. */
export const DEFAULT_COMMAND_TIMEOUT_MS = 1_800_000;
/** Setup commands (clone, install) get their own, shorter, deadline. */
export const DEFAULT_SETUP_TIMEOUT_MS = 600_000;
/** A sandbox that has not answered its first canary by then missed its connect deadline. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 30_000;
/** A live sandbox echoes a nonce in milliseconds; five seconds means it is wedged. */
export const DEFAULT_CANARY_TIMEOUT_MS = 5_000;
/** SIGINT → SIGTERM → SIGKILL, each step after this grace. */
export const DEFAULT_KILL_GRACE_MS = 500;
/** Each file-sync batch must finish within this. */
export const DEFAULT_SYNC_BATCH_TIMEOUT_MS = 60_000;
/** Breaker: this many create/connect failures inside the window opens it. */
export const DEFAULT_BREAKER_FAILURE_THRESHOLD = 5;
export const DEFAULT_BREAKER_WINDOW_MS = 60_000;
/** How long an open breaker waits before letting one half-open probe through. */
export const DEFAULT_BREAKER_OPEN_MS = 10_000;
/** Respawn backoff after repeated deaths: base × 2^(deaths-1), capped. */
export const DEFAULT_RESPAWN_BASE_DELAY_MS = 250;
export const DEFAULT_RESPAWN_MAX_DELAY_MS = 30_000;
/** Deaths older than this no longer count toward backoff. */
export const DEFAULT_RESPAWN_WINDOW_MS = 300_000;
export const DEFAULT_ATTEMPTS = 2;
export const DEFAULT_INFRA_RETRIES = 3;
export const DEFAULT_SLOTS = 1;
/** After a slot change, the next waits one default heartbeat: the new slots' sandboxes start and the queue counts catch up. */
export const DEFAULT_SLOT_SCALE_COOLDOWN_MS = 2_000;
/**
 * Idle slots go only after a surplus lasting this long: a sandbox costs seconds to create, so a
 * gap between bursts should not tear down what the next burst needs (the HPA's own down window is 5 min).
 */
export const DEFAULT_SLOT_SCALE_DOWN_DELAY_MS = 60_000;
/** Heartbeats: an owner is gone after missing two beats (timeout = 2 × interval). */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 2_000;
export const DEFAULT_HEARTBEAT_TIMEOUT_MS = 2 * DEFAULT_HEARTBEAT_INTERVAL_MS;
/** Modal requires a lifetime; a sandbox outlives many cards, so make it long. */
export const DEFAULT_SANDBOX_LIFETIME_MS = 24 * 3_600_000;
export const DEFAULT_API_PORT = 3000;
/**
 * A slot's release of a card reaches Redis within this, or with the slot's next take if that comes
 * first: a slot working many short cards writes once per card, not twice. Takes and sandbox changes go at once.
 */
export const DEFAULT_CARD_PUBLISH_INTERVAL_MS = 100;
/**
 * A finished card (done, failed, cancelled) is kept this long, with its history and its BullMQ job,
 * then expires (lane `retention.terminalCardDays`). A week covers a board's weekly review of what ran.
 */
export const DEFAULT_TERMINAL_CARD_RETENTION_DAYS = 7;
export const MS_PER_DAY = 86_400_000;
/**
 * A card's history keeps its first entry and its newest entries up to this many; older ones fold
 * into `historyDropped`. A card that runs its whole budget writes about a dozen; 200 leaves room
 * for long re-drive loops while bounding a record (and `GET /v1/cards/:id`) at about 40 KiB.
 */
export const DEFAULT_HISTORY_MAX_ENTRIES = 200;
/**
 * After Redis refused a write for want of memory (OOM), `/readyz` says not ready for this long even
 * when `INFO memory` no longer shows it over `maxmemory`: a refusal INFO cannot foresee (an eviction
 * policy that found nothing to evict) still takes the process out of rotation, for a few probe periods.
 */
export const DEFAULT_REDIS_FULL_READY_WINDOW_MS = 10_000;
