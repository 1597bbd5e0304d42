import type { OutputStream } from '@lanes/sandbox';

/** A card's output is capped in the job log; the agent's own files keep the rest. */
export const JOB_LOG_MAX_LINES = 2_000;

/** Writes a batch of lines to the job's log (`appendJobLog`: one round trip per batch). */
export type JobLogWrite = (lines: string[]) => Promise<unknown>;

/**
 * Streams command output into the BullMQ job log line by line, without awaiting Redis on the hot
 * path. At most one write is in flight: lines that come while it is are sent together once it
 * returns, so a chatty agent costs a few round trips, not one per line, and nothing waits for a
 * timer. `flush` sends what is left at once.
 */
export function jobLogSink(write: JobLogWrite): { onOutput: (stream: OutputStream, chunk: string) => void; flush: () => void } {
  const partial: Record<OutputStream, string> = { stdout: '', stderr: '' };
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
  const add = (line: string) => {
    if (lines > JOB_LOG_MAX_LINES) return;
    lines += 1;
    pending.push(lines > JOB_LOG_MAX_LINES ? `… output truncated after ${JOB_LOG_MAX_LINES} lines` : line);
  };
  return {
    onOutput(stream, chunk) {
      const parts = (partial[stream] + chunk).split('\n');
      partial[stream] = parts.pop() ?? '';
      for (const line of parts) add(stream === 'stderr' ? `[stderr] ${line}` : line);
      if (!inFlight) send();
    },
    flush() {
      for (const stream of ['stdout', 'stderr'] as const) {
        if (partial[stream]) add(stream === 'stderr' ? `[stderr] ${partial[stream]}` : partial[stream]);
        partial[stream] = '';
      }
      // The last lines go now, beside any write still in flight, so they are sent before the card's final move.
      send();
    },
  };
}
