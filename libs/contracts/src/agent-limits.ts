/**
 * Every size an agent controls, capped before it reaches Redis, events, callbacks or logs. An agent
 * is arbitrary code steered by a model: it may print gigabytes, leave a 40 MB result or a block
 * reason of 16 MiB. Each cap is named once here, with its unit; README "Threat model" lists them.
 */

/** result.json (and blocked.json) are read up to this many bytes; past it the card fails naming the file. Per lane: `maxResultBytes`. */
export const DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;
/** The most a lane may set `maxResultBytes` to: the result is stored on the card and sent in every GET and callback. */
export const MAX_RESULT_BYTES_LIMIT = 16 * 1024 * 1024;
/** A needs-human reason (blocked.json's `reason`, or the last stdout line of an exit 75) is cut to this. */
export const MAX_BLOCK_REASON_CHARS = 2_000;
/** A failing command's message carries this much of its output's tail into the card's history. */
export const MAX_MESSAGE_TAIL_CHARS = 500;
/** Per stream, how much of a command's output tail a provider keeps in memory for the verdict (the job log sees the rest, capped below). */
export const DEFAULT_MAX_OUTPUT_CHARS = 1024 * 1024;
/**
 * A local sandbox's output is read at most this fast. An agent that prints as fast as it can (`yes`)
 * would otherwise keep the worker reading, parsing and collecting garbage at full speed (a core and
 * 100+ MB of heap for 200 MB printed); held to this, it waits on its own pipe instead. Minutes of
 * build logs are far below it.
 */
export const SANDBOX_OUTPUT_MAX_BYTES_PER_S = 4 * 1024 * 1024;
/**
 * In `separate-uid` mode, the most processes and threads an agent's uid may hold at once
 * (RLIMIT_NPROC, counted per uid, and each sandbox has a uid of its own): a fork bomb stops there
 * instead of taking the host's process table. A Node agent is about a dozen threads; a test run
 * with a worker per core on a large machine a few hundred processes.
 */
export const SANDBOX_MAX_PROCESSES = 4096;
/** The BullMQ job log keeps at most this many lines of a card's output... */
export const JOB_LOG_MAX_LINES = 2_000;
/** ...each cut to this many characters (a line with no newline for a gigabyte is still one line). */
export const JOB_LOG_MAX_LINE_CHARS = 4_096;
/**
 * A running card's output (its job-log lines, `GET /v1/cards/:id/output`) is kept in Redis up to this
 * many bytes per card; older lines are trimmed first. It bounds what an agent can make Redis hold
 * (the job log's own line caps bound it too, at about 8 MiB) and is the window a client that
 * reconnects mid-run can resume within: 1 MiB is minutes of a chatty agent.
 */
export const CARD_OUTPUT_MAX_BYTES = 1024 * 1024;
/** The last this many bytes of a card's output stay with the card after it ends (`outputTail` of `GET /v1/cards/:id`). */
export const CARD_OUTPUT_TAIL_BYTES = 64 * 1024;
/**
 * One entry of a card's output stream holds at most this many bytes of lines (a line, capped at
 * JOB_LOG_MAX_LINE_CHARS, is never split). The stream is trimmed whole entries at a time, so it
 * holds at least its budget less one entry: however an agent's output was batched, the last
 * CARD_OUTPUT_TAIL_BYTES are there when it ends.
 */
export const CARD_OUTPUT_ENTRY_MAX_BYTES = CARD_OUTPUT_TAIL_BYTES;
/**
 * A card that ended without printing keeps its output stream (only the end entry, which tells a
 * reader attached at the end that nothing more comes) this long, not for the card's retention: a
 * Redis stream takes about 4.7 KB however little it holds, more than the rest of a retained card.
 * A reader that comes later finds the card ended and no stream, and ends at once.
 */
export const CARD_OUTPUT_END_GRACE_MS = 60_000;
