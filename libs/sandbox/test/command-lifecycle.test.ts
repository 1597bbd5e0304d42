import { beforeEach, describe, expect, it, vi } from 'vitest';
import { CommandLifecycle, type LifecycleTimers } from '../src/command-lifecycle.js';

// The one command lifecycle both providers use (deadline/cancel → kill → backstop → settle), on a
// clock the test turns by hand (the lifecycle's injected timers).

/** Timers that fire only when the test advances them, in due order; promises settle between. */
class ManualTimers implements LifecycleTimers {
  nowMs = 0;
  private next = 0;
  private readonly due = new Map<number, { atMs: number; fn: () => void }>();
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.due.set(id, { atMs: this.nowMs + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.due.delete(handle as number);
  }
  async advance(ms: number): Promise<void> {
    const until = this.nowMs + ms;
    for (;;) {
      await flush();
      const [id, first] = [...this.due.entries()].filter(([, t]) => t.atMs <= until).sort((a, b) => a[1].atMs - b[1].atMs)[0] ?? [];
      if (id === undefined || !first) break;
      this.due.delete(id);
      this.nowMs = first.atMs;
      first.fn();
    }
    this.nowMs = until;
    await flush();
  }
}

/** Lets settled promises run their callbacks (a kill's end arms the backstop in a then). */
const flush = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

let timers: ManualTimers;

function lifecycle(options: { timeoutMs?: number; signal?: AbortSignal; backstopMs?: number }, killMs = 0) {
  const kills: string[] = [];
  const backstop = vi.fn();
  const l = new CommandLifecycle(
    { timeoutMs: options.timeoutMs, signal: options.signal, backstopMs: options.backstopMs ?? 100, timers },
    {
      kill: (trigger) => {
        kills.push(trigger);
        return killMs > 0 ? new Promise<void>((r) => timers.setTimeout(r, killMs)) : undefined;
      },
      backstop,
    },
  );
  return { l, kills, backstop };
}

describe('CommandLifecycle', () => {
  beforeEach(() => {
    timers = new ManualTimers();
  });

  it('deadline: timedOut, one kill, and the backstop fires backstopMs after the kill is over', async () => {
    const { l, kills, backstop } = lifecycle({ timeoutMs: 1_000, backstopMs: 100 }, 50);
    l.start();
    await timers.advance(999);
    expect(kills).toEqual([]);
    await timers.advance(1);
    expect(kills).toEqual(['deadline']);
    expect(l).toMatchObject({ timedOut: true, cancelled: false });
    await timers.advance(50 + 99);
    expect(backstop).not.toHaveBeenCalled();
    await timers.advance(1);
    expect(backstop).toHaveBeenCalledOnce();
  });

  it('cancel first wins over a later deadline; the deadline still reaches the provider; one backstop', async () => {
    const ac = new AbortController();
    const { l, kills, backstop } = lifecycle({ timeoutMs: 1_000, signal: ac.signal, backstopMs: 5_000 });
    l.start();
    ac.abort();
    await timers.advance(1_000);
    expect(kills).toEqual(['cancel', 'deadline']);
    expect(l).toMatchObject({ timedOut: false, cancelled: true });
    await timers.advance(5_000);
    expect(backstop).toHaveBeenCalledOnce();
  });

  it('a signal already aborted at start cancels at once', async () => {
    const ac = new AbortController();
    ac.abort();
    const { l, kills } = lifecycle({ signal: ac.signal });
    l.start();
    expect(kills).toEqual(['cancel']);
    expect(l.cancelled).toBe(true);
  });

  it('settle: no trigger, no backstop afterwards, and the abort listener is gone', async () => {
    const ac = new AbortController();
    const { l, kills, backstop } = lifecycle({ timeoutMs: 1_000, signal: ac.signal, backstopMs: 100 });
    l.start();
    l.settle();
    ac.abort();
    await timers.advance(10_000);
    expect(kills).toEqual([]);
    expect(backstop).not.toHaveBeenCalled();
  });

  it('a command that ends while it is being killed gets no backstop', async () => {
    const { l, backstop } = lifecycle({ timeoutMs: 10, backstopMs: 100 });
    l.start();
    await timers.advance(50);
    l.settle();
    await timers.advance(1_000);
    expect(backstop).not.toHaveBeenCalled();
    expect(l.timedOut).toBe(true);
  });
});
