import { describe, expect, it } from 'vitest';
import { JOB_LOG_MAX_LINE_CHARS, JOB_LOG_MAX_LINES } from '../src/job-log.js';
import { jobLogSink } from '../src/index.js';

/** A writer whose writes stay in flight until released, recording each batch. */
function heldWriter() {
  const batches: string[][] = [];
  const releases: Array<() => void> = [];
  const write = (lines: string[]) => {
    batches.push(lines);
    return new Promise<void>((resolve) => releases.push(resolve));
  };
  const release = async () => {
    releases.shift()?.();
    // Let the writer's finally run.
    await new Promise((r) => setImmediate(r));
  };
  return { batches, write, release };
}

describe('jobLogSink', () => {
  it('sends a chunk of lines as one batch, and what comes while it is in flight as the next one', async () => {
    const w = heldWriter();
    const sink = jobLogSink(w.write);
    sink.onOutput('stdout', 'a\nb\nc\n');
    expect(w.batches).toEqual([['a', 'b', 'c']]);
    sink.onOutput('stdout', 'd\n');
    sink.onOutput('stderr', 'oops\n');
    sink.onOutput('stdout', 'e\nf');
    expect(w.batches).toHaveLength(1);
    await w.release();
    expect(w.batches).toEqual([
      ['a', 'b', 'c'],
      ['d', '[stderr] oops', 'e'],
    ]);
    await w.release();
    expect(w.batches).toHaveLength(2);
  });

  it('flush sends the unfinished lines at once, even while a write is in flight', () => {
    const w = heldWriter();
    const sink = jobLogSink(w.write);
    sink.onOutput('stdout', 'one\ntwo');
    sink.onOutput('stderr', 'half');
    sink.flush();
    expect(w.batches).toEqual([['one'], ['two', '[stderr] half']]);
  });

  it('writes nothing for a command with no output', () => {
    const w = heldWriter();
    const sink = jobLogSink(w.write);
    sink.flush();
    expect(w.batches).toEqual([]);
  });

  it('caps the log: the line after the cap says it was truncated, later ones are dropped', async () => {
    const written: string[] = [];
    const sink = jobLogSink(async (lines) => void written.push(...lines));
    sink.onOutput('stdout', `${Array.from({ length: JOB_LOG_MAX_LINES + 50 }, (_, i) => `l${i}`).join('\n')}\n`);
    sink.flush();
    await new Promise((r) => setImmediate(r));
    expect(written).toHaveLength(JOB_LOG_MAX_LINES + 1);
    expect(written.at(-2)).toBe(`l${JOB_LOG_MAX_LINES - 1}`);
    expect(written.at(-1)).toBe(`… output truncated after ${JOB_LOG_MAX_LINES} lines`);
  });

  it('cuts a long line to JOB_LOG_MAX_LINE_CHARS, saying how much was cut', async () => {
    const written: string[] = [];
    const sink = jobLogSink(async (lines) => void written.push(...lines));
    sink.onOutput('stdout', `${'x'.repeat(JOB_LOG_MAX_LINE_CHARS + 10)}\nshort\n`);
    sink.onOutput('stderr', 'y'.repeat(JOB_LOG_MAX_LINE_CHARS));
    sink.onOutput('stderr', 'yy');
    sink.flush();
    await new Promise((r) => setImmediate(r));
    expect(written).toEqual([
      `${'x'.repeat(JOB_LOG_MAX_LINE_CHARS)} … [10 more characters cut]`,
      'short',
      `[stderr] ${'y'.repeat(JOB_LOG_MAX_LINE_CHARS)} … [2 more characters cut]`,
    ]);
  });

  it('takes 20 MB with no newline in 20,000 chunks as one capped line (the old splitter rebuilt the open line per chunk: quadratic)', async () => {
    const written: string[] = [];
    const sink = jobLogSink(async (lines) => void written.push(...lines));
    const chunk = 'z'.repeat(1_000);
    for (let i = 0; i < 20_000; i++) sink.onOutput('stdout', chunk);
    sink.flush();
    await new Promise((r) => setImmediate(r));
    expect(written).toEqual([`${'z'.repeat(JOB_LOG_MAX_LINE_CHARS)} … [${20_000_000 - JOB_LOG_MAX_LINE_CHARS} more characters cut]`]);
  });
});
