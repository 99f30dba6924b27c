/**
 * One handler's slots, shared by the readers of all its partitions. A reader
 * reserves slots before it claims and gives back what the claim did not use,
 * so readers claiming at once never take more events than there are slots.
 */
export class HandlerSlots {
  private busy = 0;
  private readers: Array<() => void> = [];
  /** Who is woken first next time: rotates, so with scarce slots every reader gets its turn. */
  private first = 0;

  constructor(readonly capacity: number) {}

  get free(): number {
    return this.capacity - this.busy;
  }

  get running(): number {
    return this.busy;
  }

  /** How many readers share the slots. */
  get readerCount(): number {
    return this.readers.length;
  }

  /** A reader joins: it is told whenever slots are given back. Returns how to leave. */
  join(onFreed: () => void): () => void {
    this.readers.push(onFreed);
    return () => {
      this.readers = this.readers.filter((r) => r !== onFreed);
    };
  }

  /** Takes a fair share of the free slots (split among the readers) for one claim. */
  reserve(most: number): number {
    const free = this.free;
    if (free <= 0) return 0;
    const share = Math.min(most, Math.max(1, Math.ceil(free / Math.max(1, this.readers.length))));
    this.busy += share;
    return share;
  }

  take(count: number): void {
    this.busy += count;
  }

  give(count = 1): void {
    this.busy -= count;
    const n = this.readers.length;
    if (n === 0) return;
    this.first = (this.first + 1) % n;
    for (let i = 0; i < n; i++) this.readers[(this.first + i) % n]!();
  }
}
