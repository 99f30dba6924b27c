/**
 * How much a new handler duration moves the running average: about the last
 * ten calls count, so the pace follows a handler that slows down within a
 * few batches.
 */
const PACE_WEIGHT = 0.1;

/**
 * One handler's slots, shared by the readers of all its partitions. A slot is
 * a handler call running: it is taken when the call starts and given back
 * when the call returns, before its result is written to Redis. A reader
 * reserves slots before it claims and gives back what the claim did not use,
 * so readers claiming at once never start more calls than there are slots.
 *
 * The slots also keep the handler's pace (its calls' average duration), from
 * which a reader works out how many events it may claim ahead of the free
 * slots (prefetch): only as many as are expected to start soon.
 */
export interface SlotTaker {
  /** Starts one event it holds, in a slot it takes for it; false when it holds none. */
  startOne(): boolean;
  /** Slots were given back: its loop may claim for them. */
  freed(): void;
}

export class HandlerSlots {
  private busy = 0;
  private readers: SlotTaker[] = [];
  /** Who is offered a slot first next time: rotates, so with scarce slots every reader gets its turn. */
  private first = 0;
  private offering = false;
  /** Average handler call, ms; undefined until a call has finished. */
  private averageMs: number | undefined;
  /** Calls still to finish before readers claim ahead again (see startedLate). */
  private aheadSuspended = 0;
  /** When (performance.now()) a call last gave its slot back. */
  private lastGiveAt = Number.NEGATIVE_INFINITY;

  /**
   * `prefetch`: most events the handler's readers together hold claimed
   * ahead of its free slots (0: none, a reader claims only for free slots).
   */
  constructor(
    readonly capacity: number,
    readonly prefetch = 0,
  ) {}

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

  /** A reader joins: it is offered free slots and told when slots are given back. Returns how to leave. */
  join(reader: SlotTaker): () => void {
    this.readers.push(reader);
    return () => {
      this.readers = this.readers.filter((r) => r !== reader);
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

  /** Returns reserved slots unused; offer() hands them on. */
  unreserve(count: number): void {
    this.busy -= count;
  }

  take(count: number): void {
    this.busy += count;
  }

  /** A slot given back; `durationMs`, when a handler call ran in it, updates the pace. */
  give(count = 1, durationMs?: number): void {
    if (durationMs !== undefined) {
      this.lastGiveAt = performance.now();
      this.averageMs = this.averageMs === undefined ? durationMs : this.averageMs + PACE_WEIGHT * (durationMs - this.averageMs);
      if (this.aheadSuspended > 0) this.aheadSuspended--;
    }
    this.busy -= count;
    this.offer();
  }

  /**
   * Offers the free slots to the readers' waiting events one at a time, in
   * turn, then tells every reader. A handler that returns at once gives its
   * slot back inside startOne(): the offer under way hands it to the next
   * reader in turn rather than starting a nested one.
   */
  offer(): void {
    if (this.offering) return;
    this.offering = true;
    const n = this.readers.length;
    try {
      for (let passed = 0; this.free > 0 && passed < n; ) {
        const reader = this.readers[this.first % n]!;
        this.first = (this.first + 1) % n;
        passed = reader.startOne() ? 0 : passed + 1;
      }
    } finally {
      this.offering = false;
    }
    for (let i = 0; i < n; i++) this.readers[(this.first + i) % n]?.freed();
  }

  /**
   * An event claimed ahead waited too long for a slot: the calls running now
   * are slower than their pace says (stuck, say), and it says nothing until
   * they finish. Readers claim only for free slots until as many calls as
   * there are slots have finished.
   */
  startedLate(): void {
    this.aheadSuspended = this.capacity;
  }

  /**
   * How many events one reader's waiting ones are expected to start within
   * `withinMs`, at the handler's pace: none beyond the free slots while the
   * calls running are stuck (none ended within twice the pace).
   */
  expectedStarts(withinMs: number, now = performance.now()): number {
    const readers = Math.max(1, this.readers.length);
    const free = Math.max(0, Math.ceil(this.free / readers));
    if (this.averageMs === undefined) return free;
    const stuck = this.busy > 0 && now - this.lastGiveAt > Math.max(2 * this.averageMs, 1);
    if (stuck) return free;
    return Math.max(free, Math.floor((this.capacity * withinMs) / Math.max(this.averageMs, 0.001) / readers));
  }

  /**
   * How many events one reader may hold claimed ahead of the free slots: its
   * share of `prefetch`, or of what the handler is expected to start within
   * `withinMs` at its pace (each slot starts one event per average call),
   * whichever is less. None until a call has finished (the pace is unknown), nor for a
   * while after startedLate().
   */
  aheadAllowed(withinMs: number): number {
    if (this.prefetch === 0 || this.averageMs === undefined || this.aheadSuspended > 0) return 0;
    const readers = Math.max(1, this.readers.length);
    const startable = Math.floor((this.capacity * withinMs) / Math.max(this.averageMs, 0.001));
    return Math.floor(Math.min(this.prefetch, startable) / readers);
  }
}
