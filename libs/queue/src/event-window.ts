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

  /** `types`: the only event types kept (every type when none is given); the others are never decoded. */
  constructor(
    private readonly log: EventLog,
    private readonly windowMs: number,
    private readonly maxEvents: number,
    private readonly types?: ReadonlySet<string>,
  ) {}

  async read(nowMs: number): Promise<StoredEvent[]> {
    const fromMs = nowMs - this.windowMs;
    const first = this.lastId === undefined;
    const fresh = first ? await this.log.sincePage(fromMs, this.maxEvents, this.types) : await this.log.newerThan(this.lastId!, this.maxEvents, this.types);
    // A full page may have skipped older ones: it is the latest maxEvents entries on its own.
    this.events = first || fresh.full ? fresh.events : [...this.events, ...fresh.events];
    // The last entry read, kept or not: a skipped type is never read twice.
    this.lastId = fresh.lastId ?? this.lastId ?? `${Math.max(0, Math.floor(fromMs))}-0`;
    const inWindow = this.events.findIndex((e) => idMs(e.id) >= fromMs);
    this.events = inWindow < 0 ? [] : this.events.slice(Math.max(inWindow, this.events.length - this.maxEvents));
    return this.events;
  }
}
