import { IllegalStateError } from '@lanes/contracts';
import type { Slot } from './slot.js';

/** The slots of one lane in one process. BullMQ concurrency equals the slot count, so a free slot always exists. */
export class SlotPool {
  /** `onChange` publishes the slot, so `GET /v1/lanes` shows which card each slot holds. */
  constructor(
    readonly slots: readonly Slot[],
    private readonly onChange: (slot: Slot) => void = () => undefined,
  ) {}

  take(cardId: string): Slot {
    const free = this.slots.filter((s) => s.cardId === undefined);
    const slot = free.find((s) => s.state === 'live') ?? free[0];
    if (!slot) throw new IllegalStateError(`no free slot for card ${cardId}: concurrency exceeds slots`);
    slot.take(cardId);
    this.onChange(slot);
    return slot;
  }

  release(slot: Slot): void {
    slot.release();
    this.onChange(slot);
  }

  holding(cardId: string): Slot | undefined {
    return this.slots.find((s) => s.cardId === cardId);
  }
}
