import { agentLimits } from '@lanes/contracts';
import type { OutputStream } from '@lanes/sandbox';

/** A card's output is capped in the job log, in lines and in characters per line; the agent's own files keep the rest. */
const { JOB_LOG_MAX_LINES, JOB_LOG_MAX_LINE_CHARS } = agentLimits;
export { JOB_LOG_MAX_LINES, JOB_LOG_MAX_LINE_CHARS };

/** Writes a batch of lines to the job's log (`appendJobLog`: one round trip per batch). */
export type JobLogWrite = (lines: string[]) => Promise<unknown>;

/**
 * Streams command output into the BullMQ job log line by line, without awaiting Redis on the hot
 * path. At most one write is in flight: lines that come while it is are sent together once it
 * returns, so a chatty agent costs a few round trips, not one per line, and nothing waits for a
 * timer. `flush` sends what is left at once.
 *
 * Linear in the output's size: each chunk is scanned once for newlines, and a line still open holds
 * at most JOB_LOG_MAX_LINE_CHARS characters (a gigabyte with no newline is one capped line, not a
 * string rebuilt per chunk). Once the line cap is reached, output is no longer looked at.
 */
export function jobLogSink(write: JobLogWrite): { onOutput: (stream: OutputStream, chunk: string) => void; flush: () => void } {
  let lines = 0;
  let pending: string[] = [];
  let inFlight = false;
  const send = () => {
    if (pending.length === 0) return;
    const batch = pending;
    pending = [];
    inFlight = true;
    void write(batch)
      .catch(() => undefined)
      .finally(() => {
        inFlight = false;
        send();
      });
  };
  const add = (line: string, cut: number) => {
    if (lines > JOB_LOG_MAX_LINES) return;
    lines += 1;
    if (lines > JOB_LOG_MAX_LINES) pending.push(`… output truncated after ${JOB_LOG_MAX_LINES} lines`);
    else pending.push(cut > 0 ? `${line} … [${cut} more characters cut]` : line);
  };
  const open: Record<OutputStream, { text: string; cut: number }> = { stdout: { text: '', cut: 0 }, stderr: { text: '', cut: 0 } };
  const extend = (stream: OutputStream, piece: string) => {
    const line = open[stream];
    const room = JOB_LOG_MAX_LINE_CHARS - line.text.length;
    if (piece.length <= room) line.text += piece;
    else {
      line.text += piece.slice(0, Math.max(0, room));
      line.cut += piece.length - Math.max(0, room);
    }
  };
  const close = (stream: OutputStream) => {
    const line = open[stream];
    add(stream === 'stderr' ? `[stderr] ${line.text}` : line.text, line.cut);
    open[stream] = { text: '', cut: 0 };
  };
  return {
    onOutput(stream, chunk) {
      if (lines > JOB_LOG_MAX_LINES) return;
      let start = 0;
      for (let nl = chunk.indexOf('\n'); nl !== -1 && lines <= JOB_LOG_MAX_LINES; nl = chunk.indexOf('\n', start)) {
        extend(stream, chunk.slice(start, nl));
        close(stream);
        start = nl + 1;
      }
      if (start < chunk.length) extend(stream, chunk.slice(start));
      if (!inFlight) send();
    },
    flush() {
      for (const stream of ['stdout', 'stderr'] as const) {
        if (open[stream].text || open[stream].cut) close(stream);
      }
      // The last lines go now, beside any write still in flight, so they are sent before the card's final move.
      send();
    },
  };
}
