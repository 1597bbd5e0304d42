import type { Job } from 'bullmq';
import type { OutputStream } from '@lanes/sandbox';

/** A card's output is capped in the job log; the agent's own files keep the rest. */
export const JOB_LOG_MAX_LINES = 2_000;

/** Streams command output into the BullMQ job log line by line, without awaiting Redis on the hot path. */
export function jobLogSink(job: Job): { onOutput: (stream: OutputStream, chunk: string) => void; flush: () => void } {
  const partial: Record<OutputStream, string> = { stdout: '', stderr: '' };
  let lines = 0;
  const write = (line: string) => {
    if (lines > JOB_LOG_MAX_LINES) return;
    lines += 1;
    const text = lines > JOB_LOG_MAX_LINES ? `… output truncated after ${JOB_LOG_MAX_LINES} lines` : line;
    void job.log(text).catch(() => undefined);
  };
  return {
    onOutput(stream, chunk) {
      const parts = (partial[stream] + chunk).split('\n');
      partial[stream] = parts.pop() ?? '';
      for (const line of parts) write(stream === 'stderr' ? `[stderr] ${line}` : line);
    },
    flush() {
      for (const stream of ['stdout', 'stderr'] as const) {
        if (partial[stream]) write(stream === 'stderr' ? `[stderr] ${partial[stream]}` : partial[stream]);
        partial[stream] = '';
      }
    },
  };
}
