import type { StreamCountSnapshot } from './stream-admission.js';

/** Open SSE streams per principal and in total; the holder `evaluateStreamAdmission` reads. */
export class StreamTally {
  private readonly byPrincipal = new Map<string, number>();
  private count = 0;

  get total(): number {
    return this.count;
  }

  snapshot(principal: string): StreamCountSnapshot {
    return { total: this.count, ofPrincipal: this.byPrincipal.get(principal) ?? 0 };
  }

  open(principal: string): void {
    this.byPrincipal.set(principal, (this.byPrincipal.get(principal) ?? 0) + 1);
    this.count++;
  }

  release(principal: string): void {
    const n = (this.byPrincipal.get(principal) ?? 0) - 1;
    if (n > 0) this.byPrincipal.set(principal, n);
    else this.byPrincipal.delete(principal);
    this.count--;
  }
}
