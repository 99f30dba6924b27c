/**
 * Events a reader claimed ahead of its handler's free slots, in claim order,
 * waiting for a slot. Each may wait at most `startWithinMs` after the claim
 * that took it was sent (its lease started no earlier): one that waited
 * longer is set aside to be given back unstarted, so that no handler call
 * starts so late that its lease could run out while it runs.
 */
export class ClaimedAhead<E> {
  private waiting: Array<{ readonly event: E; readonly sentAt: number }> = [];
  /** Index of the first event still waiting: shifting an array per start would copy it. */
  private head = 0;
  private late: E[] = [];

  constructor(private readonly startWithinMs: number) {}

  get length(): number {
    return this.waiting.length - this.head;
  }

  /** Whether events were set aside for waiting too long. */
  get anyLate(): boolean {
    return this.late.length > 0;
  }

  add(events: readonly E[], sentAt: number): void {
    for (const event of events) this.waiting.push({ event, sentAt });
  }

  /** The next event fit to start, or undefined; those that waited too long are set aside on the way. */
  next(now = performance.now()): E | undefined {
    while (this.head < this.waiting.length) {
      const { event, sentAt } = this.waiting[this.head++]!;
      if (now - sentAt <= this.startWithinMs) {
        this.compact();
        return event;
      }
      this.late.push(event);
    }
    this.compact();
    return undefined;
  }

  /** Sets aside the events that waited too long; resolves how long until the next one will have. */
  sweep(now = performance.now()): number {
    while (this.head < this.waiting.length && now - this.waiting[this.head]!.sentAt > this.startWithinMs) this.late.push(this.waiting[this.head++]!.event);
    this.compact();
    return this.head < this.waiting.length ? this.waiting[this.head]!.sentAt + this.startWithinMs - now : Infinity;
  }

  /** The events set aside, leaving none. */
  takeLate(): E[] {
    const late = this.late;
    this.late = [];
    return late;
  }

  /** Every event held, late or waiting, leaving none: the reader stops or the type was paused. */
  takeAll(): E[] {
    const all = this.takeLate();
    for (let i = this.head; i < this.waiting.length; i++) all.push(this.waiting[i]!.event);
    this.waiting = [];
    this.head = 0;
    return all;
  }

  private compact(): void {
    if (this.head === this.waiting.length) {
      this.waiting = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.waiting.length) {
      this.waiting = this.waiting.slice(this.head);
      this.head = 0;
    }
  }
}
