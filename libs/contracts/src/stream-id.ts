import { z } from 'zod';

/** Each half of a Redis stream id is an unsigned 64-bit integer. */
const MAX_U64 = 2n ** 64n - 1n;
/** `<ms>-<seq>` in canonical form (no leading zeros), so two ids compare by length, then text. */
export const STREAM_ID_PATTERN = /^(0|[1-9]\d{0,19})-(0|[1-9]\d{0,19})$/;

/** A Redis stream id as `/v1/events` hands it out (`id:` lines) and takes it back (`Last-Event-ID`, `?since=`). */
export const StreamIdSchema = z
  .string()
  .regex(STREAM_ID_PATTERN, 'must be a stream id <ms>-<seq>, e.g. 1700000000000-0')
  // zod runs every check even after the pattern failed: only a well-formed id reaches BigInt.
  .refine((id) => !STREAM_ID_PATTERN.test(id) || id.split('-').every((part) => BigInt(part) <= MAX_U64), 'each part of a stream id must fit in 64 bits');

const compareDigits = (a: string, b: string) => (a.length !== b.length ? a.length - b.length : a < b ? -1 : a > b ? 1 : 0);

/** Orders two canonical stream ids: negative when `a` comes first, 0 when equal, positive after. */
export function compareStreamIds(a: string, b: string): number {
  const [aMs = '', aSeq = ''] = a.split('-');
  const [bMs = '', bSeq = ''] = b.split('-');
  return Math.sign(compareDigits(aMs, bMs) || compareDigits(aSeq, bSeq));
}
