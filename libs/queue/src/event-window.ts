import type { EventLog, StoredEvent } from './event-log.js';

/** Stream ids begin with the millisecond the entry was added. */
const idMs = (id: string) => Number(id.slice(0, id.indexOf('-')));

/**
 * The latest `maxEvents` events of the last `windowMs`, as `EventLog.since` gives them, kept
 * between reads: each read asks the stream only for what came after the last one, so a busy lane
 * does not re-read and re-parse its whole window on every supervisor sweep.
 */
export class EventWindow {
  private events: StoredEvent[] = [];
  private lastId: string | undefined;

  constructor(
    private readonly log: EventLog,
    private readonly windowMs: number,
    private readonly maxEvents: number,
  ) {}

  async read(nowMs: number): Promise<StoredEvent[]> {
    const fromMs = nowMs - this.windowMs;
    if (this.lastId === undefined) {
      this.events = await this.log.since(fromMs, this.maxEvents);
    } else {
      const fresh = await this.log.newerThan(this.lastId, this.maxEvents);
      // A full page may have skipped older ones: it is the latest maxEvents on its own.
      this.events = fresh.length >= this.maxEvents ? fresh : [...this.events, ...fresh];
    }
    this.lastId = this.events.at(-1)?.id ?? this.lastId ?? `${Math.max(0, Math.floor(fromMs))}-0`;
    const first = this.events.findIndex((e) => idMs(e.id) >= fromMs);
    this.events = first < 0 ? [] : this.events.slice(Math.max(first, this.events.length - this.maxEvents));
    return this.events;
  }
}
