interface Entry {
  readonly deadline: number;
  onTimeout: (() => void) | undefined;
}

/**
 * Timeouts that all last the same `ms`, so they expire in the order they
 * started: one timer, armed for the oldest, serves them all. A handler call
 * needs one; a setTimeout and a Promise.race per call showed in profiles of
 * thousands of calls a second.
 */
export class FifoTimeouts {
  private entries: Entry[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(readonly ms: number) {}

  /** Calls still held: every one from the oldest still running on, ended or not. */
  get held(): number {
    return this.entries.length - this.head;
  }

  /** Calls `onTimeout` after `ms` unless the returned cancel is called first. */
  start(onTimeout: () => void): () => void {
    // Calls mostly end in the order they started: the cancelled ones at the
    // head go now, not when the timer next fires, or a long timeout would keep
    // every call of its window (~67 bytes each: 10 minutes at 5,000 calls a second, 200 MB).
    while (this.head < this.entries.length && !this.entries[this.head]!.onTimeout) this.head++;
    this.compact();
    const entry: Entry = { deadline: performance.now() + this.ms, onTimeout };
    this.entries.push(entry);
    if (!this.timer) this.arm(this.ms);
    return () => {
      entry.onTimeout = undefined;
    };
  }

  private arm(inMs: number): void {
    this.timer = setTimeout(() => this.expire(), Math.max(0, Math.ceil(inMs)));
    // A cancelled call leaves the timer armed until its deadline (cheaper than
    // re-arming on every cancel); it must not keep the process alive after close().
    this.timer.unref();
  }

  private expire(): void {
    this.timer = undefined;
    const now = performance.now();
    while (this.head < this.entries.length) {
      const entry = this.entries[this.head]!;
      if (entry.onTimeout && entry.deadline > now) break;
      this.head++;
      const onTimeout = entry.onTimeout;
      entry.onTimeout = undefined;
      onTimeout?.();
    }
    this.compact();
    if (this.head < this.entries.length) this.arm(this.entries[this.head]!.deadline - now);
  }

  /** Drops what was consumed: all of it, or once it is most of the array. */
  private compact(): void {
    if (this.head === this.entries.length) {
      this.entries = [];
      this.head = 0;
    } else if (this.head > 1_024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }
}
