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
/** Modal requires a lifetime; a sandbox outlives many cards, so make it long: Modal's maximum, 24 h. */
export const DEFAULT_SANDBOX_LIFETIME_MS = 24 * 3_600_000;
/**
 * A sandbox this old is replaced between cards (a planned recycle, not a death). 20 h is safely
 * inside the 24 h lifetime: a card started then still has 4 h, and a longer card waits for a fresh
 * sandbox (the remaining-lifetime check) instead of being cut off by the provider mid-run.
 */
export const DEFAULT_SANDBOX_RECYCLE_AFTER_MS = 20 * 3_600_000;
/** An idle slot above the lane's minSlots releases its sandbox after this long: 5 min of a billed, unused sandbox. */
export const DEFAULT_IDLE_RELEASE_MS = 5 * 60_000;
export const DEFAULT_API_PORT = 3000;
/**
 * A slot's release of a card reaches Redis within this, or with the slot's next take if that comes
 * first: a slot working many short cards writes once per card, not twice. Takes and sandbox changes go at once.
 */
export const DEFAULT_CARD_PUBLISH_INTERVAL_MS = 100;

/* The API's edge: every limit a client meets, each refused with a coded error (README, HTTP API). */

/** The longest valid card id (CARD_ID_PATTERN): path parameters must hold it, or a card is accepted and then unreachable. */
export const CARD_ID_MAX_LENGTH = 128;
/** Fastify's `maxParamLength`: a path parameter as long as the longest id it may carry (card ids; lane names are ≤ 64). */
export const API_MAX_PARAM_LENGTH = CARD_ID_MAX_LENGTH;
/**
 * A whole request (headers and body) must arrive within this (Node's `requestTimeout`, answered 408
 * REQUEST_TIMEOUT): a 16 MiB bulk body at 1 MiB/s fits, a client trickling bytes does not hold a socket.
 * Responses are not timed: an SSE stream lives on after its request has arrived.
 */
export const DEFAULT_API_REQUEST_TIMEOUT_MS = 30_000;
/**
 * A socket with no traffic either way for this long is closed. SSE streams write a keepalive
 * comment every 15 s (SSE_KEEPALIVE_MS), well inside it; Node's own header deadline is 60 s.
 */
export const DEFAULT_API_CONNECTION_TIMEOUT_MS = 120_000;
/**
 * An idle keep-alive connection is closed after this. Fastify's own default, kept above the 60 s idle
 * timeout of common load balancers, so the balancer closes first and never reuses a socket being closed.
 */
export const DEFAULT_API_KEEP_ALIVE_TIMEOUT_MS = 72_000;
/**
 * Cards per bulk POST (413 BULK_TOO_LARGE beyond). One bulk is one Lua script: 20,000 cards held
 * Redis for 1.1 s; 1,000 keep it in the tens of milliseconds, well inside every worker's lock renewal.
 */
export const MAX_BULK_CARDS = 1_000;
/** A card's `metadata`, serialized as JSON (UTF-8 bytes). It rides in the job, the record and the card file. */
export const MAX_CARD_METADATA_BYTES = 64 * 1024;
/**
 * Callback entries waiting for delivery (the callback stream's length) at which enqueues of cards
 * with a callbackUrl are refused (503 CALLBACK_BACKLOG). An entry is the event JSON, a few hundred
 * bytes, so the bound is some tens of MB of Redis; at the default delivery rate it is many minutes
 * of a stalled supervisor, five times the 10,000 at which the stream used to drop entries unread.
 */
export const DEFAULT_CALLBACK_BACKLOG_MAX = 50_000;
/**
 * Callbacks one lane may owe (its entries not yet acknowledged) at which its enqueues of cards with
 * a callbackUrl are refused (503 CALLBACK_BACKLOG naming the lane). A board whose endpoint never
 * answers is delivered to at a trickle (three tries, 5 s each), so without a share of its own it
 * would fill DEFAULT_CALLBACK_BACKLOG_MAX and refuse every board's callbacks; a fifth of it leaves
 * four such boards before the stream's own bound.
 */
export const DEFAULT_LANE_CALLBACK_BACKLOG_MAX = 10_000;
/**
 * Cards a lane holds open (queued, running or blocked) at which a POST that would add more is
 * refused (429 LANE_FULL), nothing of it queued. A board is a tenant: without a bound, one board's
 * flood fills Redis to its maxmemory and every other board's enqueues fail with it. An open card
 * takes ~3.5 KiB of Redis (README "Sizing"), so the default holds a lane to ~35 MiB; at minutes
 * per card it is days of backlog for a lane of a few slots.
 */
export const DEFAULT_MAX_OPEN_CARDS = 10_000;
/**
 * Cards a config token (`tokens` in the config file) may post per second, across every API process (one bucket in Redis): a
 * bucket that holds MAX_BULK_CARDS (so one full bulk always passes when it is full) and refills at
 * this rate; past it 429 RATE_LIMITED with Retry-After. Validating and writing a card costs the API
 * CPU that every board shares, so one board's loop must not take it all. Admin tokens from
 * LANES_API_TOKENS and open mode are the operator's and are not limited.
 */
export const DEFAULT_TOKEN_CARDS_PER_S = 100;
/** The largest `cardsPerSecond` a token may set. */
export const MAX_TOKEN_CARDS_PER_S = 100_000;
/**
 * Requests a config token may make per second, of any kind (reads, streams opened, posts), per API
 * process: each process guards its own CPU and Redis connection, which every board shares, so a
 * board's runaway poll loop is refused there (429 RATE_LIMITED with Retry-After) before its handler
 * runs. The bucket holds TOKEN_REQUEST_BURST_S seconds of the rate, so a board that was quiet may
 * catch up at once. Admin tokens from LANES_API_TOKENS and open mode are not limited.
 */
export const DEFAULT_TOKEN_REQUESTS_PER_S = 100;
/** The largest `requestsPerSecond` a token may set. */
export const MAX_TOKEN_REQUESTS_PER_S = 100_000;
/** Seconds of a token's request rate its bucket holds. */
export const TOKEN_REQUEST_BURST_S = 10;
/** The largest `maxOpenCards` a lane may set (~3.4 GiB of Redis at ~3.5 KiB a card). */
export const MAX_OPEN_CARDS_LIMIT = 1_000_000;
/**
 * Card JSON bytes a lane's open cards may hold at which a POST that would add more is refused (429
 * LANE_FULL). A count alone bounds nothing when a card may carry a 1,000,000-character prompt and
 * 64 KiB of metadata: 10,000 such cards are tens of GiB. An open card's JSON is in Redis twice (its
 * record and its job), so the default holds a lane's open cards to about 256 MiB of Redis; 10,000
 * cards of 13 KiB each fit.
 */
export const DEFAULT_MAX_OPEN_BYTES = 128 * 1024 * 1024;
/** The largest `maxOpenBytes` a lane may set. */
export const MAX_OPEN_BYTES_LIMIT = 64 * 1024 * 1024 * 1024;
/**
 * SSE (`GET /v1/events`) limits. Every stream is served from one Redis reader per API process, so these
 * bound sockets and memory, not Redis connections: a board or a browser tab needs a few streams, 20 per
 * token leaves room for reconnect overlap, and 200 per process × the buffer cap bounds the worst case at 50 MiB.
 */
export const DEFAULT_SSE_MAX_STREAMS_PER_PRINCIPAL = 20;
export const DEFAULT_SSE_MAX_STREAMS_TOTAL = 200;
/** A stream whose unsent output would pass this is a slow consumer and is dropped (an event frame is ~0.3–1 KiB). */
export const DEFAULT_SSE_MAX_BUFFERED_BYTES = 256 * 1024;
/** A comment line on an idle stream keeps proxies (nginx defaults to 60 s) from closing it. */
export const DEFAULT_SSE_KEEPALIVE_MS = 15_000;
/** A dropped stream's final frame gets this long to flush before its socket is destroyed. */
export const DEFAULT_SSE_END_GRACE_MS = 2_000;
/**
 * A finished card (done, failed, cancelled) is kept this long, with its history and its BullMQ job,
 * then expires (lane `retention.terminalCardDays`). A week covers a board's weekly review of what ran.
 */
export const DEFAULT_TERMINAL_CARD_RETENTION_DAYS = 7;
/**
 * Finished cards a lane keeps at most (lane `retention.maxCards`): past it, each terminal move
 * removes the lane's oldest finished cards (at most RETAINED_EVICTIONS_PER_MOVE of them), before
 * their days are up. A board that posts and cancels in a loop makes finished cards as fast as the API
 * takes them, and days of those are gigabytes; this bounds a lane's finished cards by count as well
 * as by age. 50,000 holds the README's sizing example (5,000 a day for a week) with room to spare.
 */
export const DEFAULT_RETAINED_CARDS_MAX = 50_000;
/** The largest `retention.maxCards` a lane may set. */
export const RETAINED_CARDS_MAX_LIMIT = 10_000_000;
/**
 * Oldest finished cards one terminal move removes at most: one in the steady state, a few more
 * after `retention.maxCards` was lowered, so that the lane converges move by move and no script holds
 * Redis for thousands of deletions.
 */
export const RETAINED_EVICTIONS_PER_MOVE = 8;
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
/**
 * `GET /v1/cards`: cards per page unless `limit` says otherwise, and the most a page may hold. A page
 * is one Redis script whose work grows with the page (and with the index sets a filter merges), so
 * the cap bounds how long one listing holds Redis; 200 summaries are a few hundred KiB of JSON.
 */
export const CARD_LIST_DEFAULT_LIMIT = 50;
export const CARD_LIST_MAX_LIMIT = 200;
/** Longest `cursor` a listing takes: the API's own are under 300 characters. */
export const CARD_LIST_CURSOR_MAX_LENGTH = 1_024;

/**
 * Events the Redis event stream keeps (XADD's `MAXLEN ~`, every lane's together), and each lane's own
 * stream of its events (about 1.9 MiB at this length, README "Sizing"): how far back a `/v1/events` stream can
 * resume, the shared one for a stream over every lane, a lane's own for one scoped to it; an older
 * resume point is told as `event: gap`.
 */
export const EVENT_STREAM_MAX_LEN = 10_000;
