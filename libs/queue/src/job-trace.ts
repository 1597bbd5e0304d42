import type { JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { activeTraceMetadata, tracingEnabled } from '@lanes/tracing';
import { keys } from './names.js';

/**
 * How a card's trace travels with it, outside the card itself (a board's card schema is stable and
 * carries no trace):
 *   - in its BullMQ job's options, as BullMQ's own telemetry metadata (`tm` as stored, the
 *     `telemetry.metadata` option): the enqueue's span, which BullMQ's Worker (bullmq-otel) makes
 *     the parent of its `process` span. A job a board adds itself has none: its run starts a trace.
 *   - in the card hash, field `trace`: the `traceparent` of the run, which the supervisor's
 *     callback delivery continues. Internal: the card record (CardHashSchema) never shows it.
 */
export const CARD_TRACE_FIELD = 'trace';

/**
 * The stored options (JSON, as bullmq-job-layout.ts writes them) with the active trace's metadata
 * added as BullMQ stores it (`tm`); unchanged with tracing off or no active span. The options are
 * one JSON object, so the field goes in before its closing brace.
 */
export function withTraceMetadata(optsJson: string): string {
  if (!tracingEnabled()) return optsJson;
  const metadata = activeTraceMetadata();
  return metadata === undefined ? optsJson : `${optsJson.slice(0, -1)},"tm":${JSON.stringify(metadata)}}`;
}

/** BullMQ job options with the active trace's metadata, for jobs BullMQ's own add writes. */
export function withTraceOption(opts: JobsOptions): JobsOptions {
  if (!tracingEnabled()) return opts;
  const metadata = activeTraceMetadata();
  return metadata === undefined ? opts : { ...opts, telemetry: { metadata } };
}

/**
 * Notes the run's `traceparent` on the card (only on a card that exists: the field never makes a
 * hash by itself). No-op without one.
 */
export async function rememberCardTrace(redis: Redis, cardId: string, traceparent: string | undefined): Promise<void> {
  if (traceparent === undefined) return;
  await redis.eval(SET_IF_CARD_LUA, 1, keys.card(cardId), CARD_TRACE_FIELD, traceparent);
}

const SET_IF_CARD_LUA = `if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end return 0`;

/** The `traceparent` a run noted on the card, if any (read only with tracing on). */
export async function cardTrace(redis: Redis, cardId: string): Promise<string | undefined> {
  if (!tracingEnabled()) return undefined;
  return (await redis.hget(keys.card(cardId), CARD_TRACE_FIELD)) ?? undefined;
}
