import type { Slot } from './slot.js';

export interface SlotPoolDeps {
  /** Publishes the slot, so `GET /v1/lanes` shows which card each slot holds: a take at once, a release may wait. */
  onChange: (slot: Slot, change: 'take' | 'release') => void;
  /** Adds one slot to the pool and starts it; called when a card finds every slot busy. */
  grow: (reason: string) => Slot;
}

/**
 * The slots of one lane in one process. BullMQ concurrency follows the slot count, so a free slot
 * normally exists. A card fetched under a concurrency that a scale-down has since lowered finds
 * none: it gets a new slot rather than a failure (the pool then holds no more than that old
 * concurrency, itself within the worker's range), and the scaler trims the surplus once idle.
 */
export class SlotPool {
  private list: Slot[] = [];

  constructor(private readonly deps: SlotPoolDeps) {}

  get slots(): readonly Slot[] {
    return this.list;
  }

  get size(): number {
    return this.list.length;
  }

  has(slot: Slot): boolean {
    return this.list.includes(slot);
  }

  add(slot: Slot): void {
    this.list.push(slot);
  }

  /** Takes the slot out of the pool if it is still idle (no card, no probe out); undefined otherwise. */
  detachIdle(slotId: string): Slot | undefined {
    const slot = this.list.find((s) => s.id === slotId);
    if (!slot || slot.cardId !== undefined || slot.probing) return undefined;
    this.list = this.list.filter((s) => s !== slot);
    return slot;
  }

  take(cardId: string): Slot {
    const free = this.list.filter((s) => s.cardId === undefined);
    const slot = free.find((s) => s.state === 'live') ?? free[0] ?? this.deps.grow(`card ${cardId} found every slot busy`);
    slot.take(cardId);
    this.deps.onChange(slot, 'take');
    return slot;
  }

  release(slot: Slot): void {
    slot.release();
    this.deps.onChange(slot, 'release');
  }

  holding(cardId: string): Slot | undefined {
    return this.list.find((s) => s.cardId === cardId);
  }
}
