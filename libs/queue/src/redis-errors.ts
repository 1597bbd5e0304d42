import { ReplyError } from 'ioredis';
import { RedisFullError } from '@lanes/contracts';

/** The reply code Redis answers a write with when it is at `maxmemory` and may not evict. */
const OOM_REPLY_CODE = 'OOM';
/** The reply code of `XGROUP CREATE` for a group that exists. */
const BUSYGROUP_REPLY_CODE = 'BUSYGROUP';

/** A Redis error reply's code: its first word (`OOM`, `ERR`, `EXECABORT`, …). */
function replyCode(err: Error): string {
  const space = err.message.indexOf(' ');
  return space < 0 ? err.message : err.message.slice(0, space);
}

function isReplyError(err: unknown): err is Error & { previousErrors?: unknown } {
  return err instanceof (ReplyError as new (...args: never[]) => Error);
}

/**
 * The one reading of a Redis error as "Redis is full": an OOM reply, from a command, from a script
 * (Redis keeps the code: `OOM command not allowed … script: …`), or among the refusals of a MULTI
 * that Redis discarded (`EXECABORT`, with ioredis's `previousErrors`). Answers the typed error to
 * throw or answer with, or undefined for anything else (a transport error is no reply).
 */
export function asRedisFullError(err: unknown): RedisFullError | undefined {
  if (err instanceof RedisFullError) return err;
  if (!isReplyError(err)) return undefined;
  if (replyCode(err) === OOM_REPLY_CODE) return new RedisFullError({ cause: err });
  if (Array.isArray(err.previousErrors) && err.previousErrors.some((e) => asRedisFullError(e) !== undefined)) return new RedisFullError({ cause: err });
  return undefined;
}

/** Whether `err` is Redis refusing `XGROUP CREATE` because the group exists (another process made it first). */
export function isGroupExistsError(err: unknown): boolean {
  return isReplyError(err) && replyCode(err) === BUSYGROUP_REPLY_CODE;
}
