import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CommandLifecycle } from '../src/command-lifecycle.js';

// The one command lifecycle both providers use (deadline/cancel → kill → backstop → settle), on fake timers.

function lifecycle(options: { timeoutMs?: number; signal?: AbortSignal; backstopMs?: number }, killMs = 0) {
  const kills: string[] = [];
  const backstop = vi.fn();
  const l = new CommandLifecycle(
    { timeoutMs: options.timeoutMs, signal: options.signal, backstopMs: options.backstopMs ?? 100 },
    {
      kill: (trigger) => {
        kills.push(trigger);
        return killMs > 0 ? new Promise<void>((r) => setTimeout(r, killMs)) : undefined;
      },
      backstop,
    },
  );
  return { l, kills, backstop };
}

describe('CommandLifecycle', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('deadline: timedOut, one kill, and the backstop fires backstopMs after the kill is over', async () => {
    const { l, kills, backstop } = lifecycle({ timeoutMs: 1_000, backstopMs: 100 }, 50);
    l.start();
    await vi.advanceTimersByTimeAsync(999);
    expect(kills).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(kills).toEqual(['deadline']);
    expect(l).toMatchObject({ timedOut: true, cancelled: false });
    await vi.advanceTimersByTimeAsync(50 + 99);
    expect(backstop).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(backstop).toHaveBeenCalledOnce();
  });

  it('cancel first wins over a later deadline; the deadline still reaches the provider; one backstop', async () => {
    const ac = new AbortController();
    const { l, kills, backstop } = lifecycle({ timeoutMs: 1_000, signal: ac.signal, backstopMs: 5_000 });
    l.start();
    ac.abort();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(kills).toEqual(['cancel', 'deadline']);
    expect(l).toMatchObject({ timedOut: false, cancelled: true });
    await vi.advanceTimersByTimeAsync(5_000);
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
    await vi.advanceTimersByTimeAsync(10_000);
    expect(kills).toEqual([]);
    expect(backstop).not.toHaveBeenCalled();
  });

  it('a command that ends while it is being killed gets no backstop', async () => {
    const { l, backstop } = lifecycle({ timeoutMs: 10, backstopMs: 100 });
    l.start();
    await vi.advanceTimersByTimeAsync(50);
    l.settle();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(backstop).not.toHaveBeenCalled();
    expect(l.timedOut).toBe(true);
  });
});
