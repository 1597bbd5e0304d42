/**
 * Accumulates a command's output but keeps only the last `maxChars`: a half-hour agent run can print
 * gigabytes, and the end of the output is where the error is. Trimming happens once the buffer holds
 * twice the cap, so appends stay amortized O(1).
 */
export class CappedText {
  private chunks: string[] = [];
  private chars = 0;
  private droppedChars = 0;

  constructor(private readonly maxChars: number) {}

  append(chunk: string): void {
    this.chunks.push(chunk);
    this.chars += chunk.length;
    if (this.chars > 2 * this.maxChars) this.trim();
  }

  /** Characters dropped from the front so far. */
  get dropped(): number {
    return this.droppedChars + Math.max(0, this.chars - this.maxChars);
  }

  toString(): string {
    this.trim();
    return this.chunks.join('');
  }

  private trim(): void {
    const joined = this.chunks.join('');
    const excess = Math.max(0, joined.length - this.maxChars);
    this.droppedChars += excess;
    this.chunks = [excess > 0 ? joined.slice(excess) : joined];
    this.chars = this.chunks[0]!.length;
  }
}
