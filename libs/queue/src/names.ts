import type { BlockedReason, CardState } from '@lanes/contracts';

/** BullMQ prefix: a lane's queue keys are `lanes:<lane>:*`, as boards that speak BullMQ expect. */
export const QUEUE_PREFIX = 'lanes';
/**
 * Our own keys live under a different prefix so that no lane name can collide with them
 * (a lane called "card" would otherwise share `lanes:card:*` with BullMQ).
 */
export const STORE_PREFIX = 'lanes-store';

/** What a lane's listing index of a state other than blocked is named after: `<prefix><state>`. */
export function cardIndexPrefix(lane: string): string {
  return `${STORE_PREFIX}:lane:${lane}:cards:`;
}

const blockedIndex = (lane: string) => `${STORE_PREFIX}:lane:${lane}:blocked`;

export const keys = {
  card: (id: string) => `${STORE_PREFIX}:card:${id}`,
  history: (id: string) => `${STORE_PREFIX}:card:${id}:history`,
  /** Run tokens replaced by a takeover while their worker never said it was fenced: crash suspects. */
  crashSuspects: (id: string) => `${STORE_PREFIX}:card:${id}:crash-suspects`,
  /** Run tokens whose worker fenced itself (lost its lock alive): their takeovers spend no budget. */
  fencedRuns: (id: string) => `${STORE_PREFIX}:card:${id}:fenced-runs`,
  /** BullMQ's hash of a card's job, and its log list (what Bull Board shows as the job's logs). */
  job: (lane: string, id: string) => `${QUEUE_PREFIX}:${queueName(lane)}:${id}`,
  jobLogs: (lane: string, id: string) => `${QUEUE_PREFIX}:${queueName(lane)}:${id}:logs`,
  /**
   * A card's output lines as a Redis stream (job-log-append.ts writes it with the job log, byte-capped;
   * card-script.ts adds an end entry at each terminal move and gives it the card's expiry).
   */
  cardOutput: (id: string) => `${STORE_PREFIX}:card:${id}:output`,
  /** BullMQ's lock of a card's job (job id = card id); its value is the holding run's token. */
  jobLock: (lane: string, id: string) => `${QUEUE_PREFIX}:${queueName(lane)}:${id}:lock`,
  /** BullMQ's list of a lane's waiting jobs (not prioritized ones): pushed on the left, taken from the right. */
  waitList: (lane: string) => `${QUEUE_PREFIX}:${queueName(lane)}:wait`,
  /** BullMQ's sorted set of a lane's prioritized jobs, taken lowest score first. */
  prioritizedSet: (lane: string) => `${QUEUE_PREFIX}:${queueName(lane)}:prioritized`,
  /** BullMQ's list of a lane's active jobs, and the set its stalled check marks them in. */
  jobActive: (lane: string) => `${QUEUE_PREFIX}:${queueName(lane)}:active`,
  jobStalled: (lane: string) => `${QUEUE_PREFIX}:${queueName(lane)}:stalled`,
  /**
   * The lane's blocked cards, scored by the time of their last move: what re-drives read, and the
   * listing index of the lane's blocked cards (cardIndex(lane, 'blocked') is this set).
   */
  blocked: blockedIndex,
  /**
   * Listing indexes (`GET /v1/cards`), sorted sets of card ids scored by their last move's time (ms):
   * one per lane and state, each card in exactly the one of its state, and one per lane and
   * blocked reason. Kept by the scripts that write the moves (card-script.ts, enqueue-script.ts).
   */
  cardIndex: (lane: string, state: CardState) => (state === 'blocked' ? blockedIndex(lane) : `${cardIndexPrefix(lane)}${state}`),
  blockedReasonIndex: (lane: string, reason: BlockedReason) => `${blockedIndex(lane)}:${reason}`,
  /**
   * Fair per-key concurrency (key-limit-script.ts): the ids of a key's cards admitted to run (a set,
   * counted only where the job's lock is held), its parked cards in the order they first waited (a
   * sorted set scored by that time), and all of a lane's parked cards (the lane counts' and the
   * scale endpoint's `waiting (key limit)`). Each empties, and so goes, when no card waits or runs.
   */
  keyRunning: (lane: string, key: string) => `${STORE_PREFIX}:lane:${lane}:key:${key}:running`,
  keyWaiting: (lane: string, key: string) => `${STORE_PREFIX}:lane:${lane}:key:${key}:waiting`,
  keyParked: (lane: string) => `${STORE_PREFIX}:lane:${lane}:key-parked`,
  /**
   * One run per PR (supersede.ts in libs/contracts): the newest card of a lane's supersede key (its
   * id, written with the newest card's record; it expires after SUPERSEDE_LATEST_TTL_MS), and the
   * same three sets as a concurrency key's, with a limit of one, for the cards of the key admitted
   * to run, waiting for it, and all of the lane's parked so.
   */
  supersedeLatest: (lane: string, key: string) => `${STORE_PREFIX}:lane:${lane}:supersede:${key}:latest`,
  supersedeRunning: (lane: string, key: string) => `${STORE_PREFIX}:lane:${lane}:supersede:${key}:running`,
  supersedeWaiting: (lane: string, key: string) => `${STORE_PREFIX}:lane:${lane}:supersede:${key}:waiting`,
  supersedeParked: (lane: string) => `${STORE_PREFIX}:lane:${lane}:supersede-parked`,
  /**
   * The card JSON bytes of a lane's open cards (queued, running or blocked): added by the enqueue
   * script, given back by the move that ends each card, added again by a retry (lane `maxOpenBytes`).
   */
  openBytes: (lane: string) => `${STORE_PREFIX}:lane:${lane}:open-bytes`,
  /** A config token's bucket of cards (card-rate-bucket.ts), shared by every API process. */
  cardRate: (token: string) => `${STORE_PREFIX}:rate:cards:${token}`,
  slots: (lane: string) => `${STORE_PREFIX}:lane:${lane}:slots`,
  breaker: (lane: string) => `${STORE_PREFIX}:lane:${lane}:breaker`,
  health: (lane: string) => `${STORE_PREFIX}:lane:${lane}:health`,
  sandbox: (id: string) => `${STORE_PREFIX}:sandbox:${id}`,
  lanes: () => `${STORE_PREFIX}:lanes`,
  laneIsolation: () => `${STORE_PREFIX}:lanes:isolation`,
  /** Hash: worker id → beat sequence. (The older `workers` key held timestamps; it is no longer read.) */
  workerBeats: () => `${STORE_PREFIX}:worker-beats`,
  /** Hash: worker id → the supervisor's liveness verdict, with a TTL. */
  liveness: () => `${STORE_PREFIX}:liveness`,
  events: () => `${STORE_PREFIX}:events`,
  /**
   * One lane's events, under the same ids as in `events` (lane-event-streams.ts): a board's replay
   * window that other boards' bursts do not move.
   */
  laneEvents: (lane: string) => `${STORE_PREFIX}:lane:${lane}:events`,
  /** The id of the first event written to the lane streams as well: from it on, they hold every event (lane-event-streams.ts). */
  laneEventsSince: () => `${STORE_PREFIX}:events:lanes-since`,
  /** The events a board is to hear about, of cards that have a callbackUrl: what the callback dispatcher reads. */
  callbacks: () => `${STORE_PREFIX}:callbacks`,
  /**
   * Hash: lane → the callback entries of its cards not yet acknowledged (the callback stream's name
   * and `:owed`, which the scripts build from the stream's key). Counted where an entry carries its
   * lane (field `l`); emptied whenever the stream is.
   */
  callbacksOwed: () => `${STORE_PREFIX}:callbacks:owed`,
  /** Job keys an enqueue guards from BullMQ's add for the length of its MULTI (see enqueue-script.ts); empty outside one. */
  enqueueGuards: () => `${STORE_PREFIX}:enqueue-guards`,
  /** Written before each replica ack (replica-ack.ts): WAIT answers for the writes of the connection it is sent on. */
  replicaAck: () => `${STORE_PREFIX}:replica-ack`,
  cancelChannel: () => `${STORE_PREFIX}:cancel`,
} as const;

/** The queue for a lane is named after the lane (names are validated to exclude ':'). */
export function queueName(lane: string): string {
  return lane;
}
