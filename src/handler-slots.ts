/** Counts one handler's free slots; the reader claims no more events than are free. */
export class HandlerSlots {
  private busy = 0;
  private waiters: Array<() => void> = [];

  constructor(readonly capacity: number) {}

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
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves when a slot is free, or when `signal` aborts. */
  async whenFree(signal: AbortSignal): Promise<void> {
    while (this.free <= 0 && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done);
          resolve();
        };
        this.waiters.push(done);
        signal.addEventListener('abort', done, { once: true });
      });
    }
  }

  /** Resolves when nothing runs. */
  async whenIdle(): Promise<void> {
    while (this.busy > 0) await new Promise<void>((resolve) => this.waiters.push(resolve));
  }
}
