import { QUIET_AFTER_MS } from './quiet-looks';
import { Wakeup } from './wakeup';

/**
 * A reader's idle wait (src/runtime/ready-reader.ts): until a nudge (events
 * may be ready), a result to send, stop, or readerBlockMs; while its queue is
 * quiet (src/runtime/quiet-looks.ts), until a nudge alone. A nudge that came
 * while the last claim was in flight ends the next wait at once.
 */
export class ReaderIdle {
  private readonly wakeup = new Wakeup();
  private wakes = 0;
  private wakesAtClaim = 0;
  private nudgedAt = 0;
  /** In a wait that may stay quiet: the reader has nothing to do until a nudge. */
  private waitingQuietly = false;
  /** When (performance.now()) a claim last took events or sent results. */
  private activeAt = performance.now();

  constructor(
    private readonly blockMs: number,
    private readonly listening: (() => boolean) | undefined,
  ) {}

  /** Ends the wait under way, or the next one. */
  wake(): void {
    this.wakes++;
    this.wakeup.wake();
  }

  /** A claim is sent: it sees the nudges before it. */
  claimSent(): void {
    this.wakeup.clear();
    this.wakesAtClaim = this.wakes;
  }

  /** A claim took events or sent results: the queue is active here. */
  active(): void {
    this.activeAt = performance.now();
  }

  quiet(now = performance.now()): boolean {
    return this.listening !== undefined && now - this.activeAt >= QUIET_AFTER_MS && this.listening();
  }

  /** Quiet, and waiting for a nudge alone: its reader may be parked (src/runtime/parked-looks.ts). */
  get parkable(): boolean {
    return this.waitingQuietly && this.quiet();
  }

  /** Calls `nudge` when quiet, at most once per readerBlockMs (a reader that is not quiet looks by itself). */
  nudgeIfQuiet(nudge: () => void): void {
    const now = performance.now();
    if (!this.quiet(now) || now - this.nudgedAt < this.blockMs) return;
    this.nudgedAt = now;
    nudge();
  }

  /** Waits until woken, `mostMs`, or readerBlockMs (not while quiet, when `mayQuiet`); `done` ends it before each wait. */
  async wait(done: () => boolean, mostMs: number, mayQuiet: boolean): Promise<void> {
    const until = performance.now() + mostMs;
    let wakes = this.wakesAtClaim;
    for (;;) {
      if (done()) return;
      this.waitingQuietly = mayQuiet && until === Number.POSITIVE_INFINITY;
      await this.wakeup.wait(Math.max(1, Math.min(this.blockMs, Math.ceil(until - performance.now()))));
      this.waitingQuietly = false;
      const now = performance.now();
      if (this.wakes !== wakes || now >= until || !mayQuiet || !this.quiet(now)) return;
      wakes = this.wakes;
    }
  }
}
