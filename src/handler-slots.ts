/** Counts one handler's free slots; the reader claims no more events than are free. */
export class HandlerSlots {
  private busy = 0;

  /** `onFreed` is told each time a slot is given back. */
  constructor(
    readonly capacity: number,
    private readonly onFreed: () => void,
  ) {}

  get free(): number {
    return this.capacity - this.busy;
  }

  get running(): number {
    return this.busy;
  }

  take(count: number): void {
    this.busy += count;
  }

  give(): void {
    this.busy--;
    this.onFreed();
  }
}
