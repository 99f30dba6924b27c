/**
 * How long a confirmation from Redis that an event held ahead may start (its
 * claim still holds, the type is not paused) stays good. An event whose slot
 * frees later is confirmed again first: so a cancel, replace or pause that
 * resolved before its slot freed stops it, however long it waited behind a
 * slow call, and the window in which one that resolves just after the
 * confirmation still lets it start stays this short.
 */
export const CONFIRMED_FOR_MS = 10;

/** An event held ahead, as the reader's calls see it. */
export interface Held<E> {
  readonly event: E;
  readonly sentAt: number;
  /** When Redis last confirmed it (the reply's arrival here); NaN while not confirmed. */
  confirmedAt: number;
  /** A confirmation is under way in the reader's current call. */
  asking: boolean;
  /** Redis refused it: its claim ended (cancelled, replaced, expired). It never starts here. */
  revoked: boolean;
  /** No longer waiting here: started, set aside as late, or taken. */
  gone: boolean;
}

/**
 * Events a reader claimed ahead of its handler's free slots, in claim order,
 * waiting for a slot. One starts only once Redis has confirmed, within the
 * last CONFIRMED_FOR_MS, that its claim still holds and the type is not
 * paused: an event claimed for a free slot is confirmed by its claim; the
 * others by a later call of the reader (lua/complete-and-claim.lua). Each may
 * wait at most `startWithinMs` after the claim that took it was sent (its
 * lease started no earlier): one that waited longer is set aside to be given
 * back unstarted, so that no handler call starts so late that its lease
 * could run out while it runs.
 */
export class ClaimedAhead<E> {
  private waiting: Array<Held<E>> = [];
  /** Index of the first event still waiting: shifting an array per start would copy it. */
  private head = 0;
  private late: E[] = [];
  private revokedCount = 0;

  /** `confirming`: false when the consumer confirms each event itself (ReaderSettings.confirmedByConsumer). */
  constructor(
    private readonly startWithinMs: number,
    private readonly confirming = true,
  ) {}

  /** Events held, revoked ones aside. */
  get length(): number {
    return this.waiting.length - this.head - this.revokedCount;
  }

  /** Whether events were set aside for waiting too long. */
  get anyLate(): boolean {
    return this.late.length > 0;
  }

  /** Adds a claim's events, its reply arrived at `sentAt`; the first `confirmed` were claimed for free slots: the claim confirms them. */
  add(events: readonly E[], sentAt: number, confirmed: number): void {
    events.forEach((event, i) => {
      this.waiting.push({ event, sentAt, confirmedAt: i < confirmed ? sentAt : Number.NaN, asking: false, revoked: false, gone: false });
    });
  }

  /**
   * The next event fit to start, or undefined: none waits, or the first in
   * line is not confirmed lately (needsConfirmation() then says so). Those that
   * waited too long are set aside on the way.
   */
  next(now = performance.now()): E | undefined {
    this.setAsideLate(now);
    const first = this.waiting[this.head];
    if (first === undefined || (this.confirming && !(now - first.confirmedAt <= CONFIRMED_FOR_MS))) return undefined;
    first.gone = true;
    this.head++;
    this.skipRevoked();
    this.compact();
    return first.event;
  }

  /** Whether the first in line waits for a confirmation that no call has asked for yet. */
  needsConfirmation(now = performance.now()): boolean {
    this.setAsideLate(now);
    const first = this.waiting[this.head];
    return this.confirming && first !== undefined && !first.asking && !(now - first.confirmedAt <= CONFIRMED_FOR_MS);
  }

  /**
   * The events to confirm in the next call: of the first `inLine` waiting,
   * those not confirmed lately and not being asked about. They are marked as
   * asked until settleConfirmations() or confirmationsFailed().
   */
  toConfirm(inLine: number, now = performance.now()): Array<Held<E>> {
    const asked: Array<Held<E>> = [];
    if (!this.confirming) return asked;
    let seen = 0;
    for (let i = this.head; i < this.waiting.length && seen < inLine; i++) {
      const held = this.waiting[i]!;
      if (held.revoked) continue;
      seen++;
      if (held.asking || now - held.confirmedAt <= CONFIRMED_FOR_MS) continue;
      held.asking = true;
      asked.push(held);
    }
    return asked;
  }

  /** What Redis said of the events asked about: `refused` holds their positions in `asked` that it refused. */
  settleConfirmations(asked: ReadonlyArray<Held<E>>, refused: ReadonlySet<number>, arrivedAt: number): void {
    asked.forEach((held, i) => {
      held.asking = false;
      if (!refused.has(i)) held.confirmedAt = arrivedAt;
      else if (!held.revoked && !held.gone) {
        held.revoked = true;
        this.revokedCount++;
      }
    });
    this.skipRevoked();
  }

  /** The call that asked failed: they are asked again with the next one. */
  confirmationsFailed(asked: ReadonlyArray<Held<E>>): void {
    for (const held of asked) held.asking = false;
  }

  /** Sets aside the events that waited too long; resolves how long until the next one will have. */
  sweep(now = performance.now()): number {
    this.setAsideLate(now);
    const first = this.waiting[this.head];
    return first !== undefined ? first.sentAt + this.startWithinMs - now : Infinity;
  }

  /** The events set aside, leaving none. */
  takeLate(): E[] {
    const late = this.late;
    this.late = [];
    return late;
  }

  /** Every event held, late or waiting, leaving none: the reader stops or the type was paused. Revoked ones are no longer the reader's. */
  takeAll(): E[] {
    const all = this.takeLate();
    for (let i = this.head; i < this.waiting.length; i++) {
      const held = this.waiting[i]!;
      held.gone = true;
      if (!held.revoked) all.push(held.event);
    }
    this.waiting = [];
    this.head = 0;
    this.revokedCount = 0;
    return all;
  }

  private setAsideLate(now: number): void {
    this.skipRevoked();
    while (this.head < this.waiting.length && now - this.waiting[this.head]!.sentAt > this.startWithinMs) {
      const held = this.waiting[this.head++]!;
      held.gone = true;
      this.late.push(held.event);
      this.skipRevoked();
    }
    this.compact();
  }

  private skipRevoked(): void {
    while (this.head < this.waiting.length && this.waiting[this.head]!.revoked) {
      this.waiting[this.head]!.gone = true;
      this.head++;
      this.revokedCount--;
    }
  }

  private compact(): void {
    if (this.head === this.waiting.length) {
      this.waiting = [];
      this.head = 0;
      this.revokedCount = 0;
    } else if (this.head > 1024 && this.head * 2 > this.waiting.length) {
      this.waiting = this.waiting.slice(this.head);
      this.head = 0;
    }
  }
}
