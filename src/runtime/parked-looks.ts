import type { LuaScripts } from '../redis/lua-scripts';
import { type DispatchLook, dispatchOnce, quietEveryMs } from './dispatcher';
import { METRIC, type Metrics } from './metrics';
import { OutageBackoff } from './outage-backoff';
import { quietLookIn } from './quiet-looks';

/**
 * A queue whose loops are parked (since 0.6): its dispatchers, reader and
 * consumer were quiet and held nothing, so they were stopped and dropped; what
 * stays is what their looks send.
 */
export interface ParkedQueue {
  readonly looks: readonly DispatchLook[];
  /** Applies the flow notices asked for meanwhile (lookEverywhere pokes them); rejects like any Redis call. */
  afterLooks(): Promise<void>;
  /** Its loops are made again: a look found work, or the queue needs them. */
  wake(): void;
  /** The look asked for next sweeps the queue's flow notices (lookEverywhere). */
  pokeFlows(): void;
}

/**
 * The looks of every parked queue of an instance, made here instead of by
 * their dispatchers: the same script call, when a quiet dispatcher would have
 * made it (its next due time, or its quiet look). A look that moves events,
 * finds events ready, or finds the queue paused wakes the queue: its loops are
 * made again, and claim at once. So a handled type costs its loops' memory
 * only while it is active (benchmarks/MANY-TYPES-RESULTS.md), and the safety
 * nets of src/runtime/quiet-looks.ts keep their bounds: while wake-ups do not
 * reach this instance (check()), a parked queue looks every pollIntervalMs.
 */
export class ParkedLooks {
  private readonly timers = new Map<ParkedQueue, NodeJS.Timeout>();
  /** Looks under way, by queue: forget() and stop() wait for them. */
  private readonly looking = new Map<ParkedQueue, Promise<void>>();
  /** Looks under way when a look of every queue was asked for: each looks again once answered. */
  private readonly lookAgain = new Set<ParkedQueue>();
  private readonly backoff = new OutageBackoff();
  /** How many times every queue was asked to look: a queue being parked meanwhile looks at once. */
  private everywhere = 0;
  private stopped = false;

  constructor(
    private readonly scripts: () => LuaScripts,
    private readonly metrics: Metrics,
    /** Whether wake-ups reach this instance end to end: else a parked queue looks every pollIntervalMs. */
    private readonly listening: () => boolean,
  ) {}

  /** How many queues are parked. */
  get size(): number {
    return this.timers.size + this.looking.size;
  }

  has(queue: ParkedQueue): boolean {
    return this.timers.has(queue) || this.looking.has(queue);
  }

  /** A mark to hand park(): what was asked of every parked queue from here on, a queue parked then is asked too. */
  mark(): number {
    return this.everywhere;
  }

  /**
   * Looks at `queue` at performance.now() `at`, and on from there, until it
   * wakes or is forgotten; at once if every queue was asked to look since
   * `mark` (its loops were stopping then), within pollIntervalMs while
   * wake-ups do not reach this instance.
   */
  park(queue: ParkedQueue, at: number, mark: number): void {
    if (this.stopped) return;
    let inMs = at - performance.now();
    if (mark !== this.everywhere) {
      queue.pokeFlows();
      inMs = 0;
    }
    if (!this.listening()) inMs = Math.min(inMs, pollIntervalOf(queue));
    this.schedule(queue, inMs);
  }

  /** Stops looking at `queue`; resolves once a look of it under way is answered (nothing follows it). */
  forget(queue: ParkedQueue): Promise<void> {
    clearTimeout(this.timers.get(queue));
    this.timers.delete(queue);
    const look = this.looking.get(queue);
    this.looking.delete(queue);
    this.lookAgain.delete(queue);
    return look ?? Promise.resolve();
  }

  /** Every parked queue looks now (lookEverywhere: an instance went silent, the subscription came back). */
  lookEverywhere(): void {
    this.everywhere++;
    for (const queue of this.looking.keys()) {
      queue.pokeFlows();
      this.lookAgain.add(queue);
    }
    for (const queue of [...this.timers.keys()]) {
      queue.pokeFlows();
      this.schedule(queue, 0);
    }
  }

  /** A wake-up for `queue` (something falls due sooner, a resume): it looks now, as its dispatcher would. */
  lookNow(queue: ParkedQueue): void {
    if (this.timers.has(queue)) this.schedule(queue, 0);
  }

  /** Whether wake-ups reach this instance changed: those that no longer do look within pollIntervalMs. */
  check(): void {
    if (this.listening()) return;
    for (const queue of [...this.timers.keys()]) this.schedule(queue, pollIntervalOf(queue));
  }

  /** No more looks; resolves once those under way are answered. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    const looking = [...this.looking.values()];
    this.looking.clear();
    this.lookAgain.clear();
    await Promise.all(looking);
  }

  private schedule(queue: ParkedQueue, inMs: number): void {
    clearTimeout(this.timers.get(queue));
    const timer = setTimeout(
      () => {
        this.timers.delete(queue);
        const look = this.look(queue);
        this.looking.set(queue, look);
      },
      Math.max(0, inMs),
    );
    timer.unref();
    this.timers.set(queue, timer);
  }

  private look(queue: ParkedQueue): Promise<void> {
    // Forgotten (woken, removed, stopped) while its look ran: what the look says is not acted on.
    const forgotten = () => this.stopped || this.looking.get(queue) !== look;
    const look = Promise.resolve().then(async () => {
      let nextInMs = Infinity;
      try {
        for (const spec of queue.looks) {
          const result = await dispatchOnce(spec, this.scripts(), this.metrics, forgotten);
          if (forgotten()) return;
          // Work here, or a paused queue (readyWaiting -1), whose looks come every pollIntervalMs: its loops again.
          if (result.movedDue + result.movedExpired + result.handedToGroups > 0 || result.readyWaiting !== 0) {
            this.looking.delete(queue);
            this.lookAgain.delete(queue);
            queue.wake();
            return;
          }
          const untilNext = result.nextDue < 0 ? Infinity : Math.max(0, result.nextDue - result.now);
          nextInMs = Math.min(nextInMs, untilNext, this.listening() ? quietLookIn(quietEveryMs(spec)) : spec.pollIntervalMs);
        }
        await queue.afterLooks();
        this.backoff.reset();
      } catch {
        this.metrics.count(METRIC.redisErrors, { loop: 'dispatcher', type: queue.looks[0]?.keys.type ?? '' });
        nextInMs = this.backoff.next();
      }
      if (forgotten()) return;
      this.looking.delete(queue);
      if (this.lookAgain.delete(queue)) nextInMs = 0;
      this.schedule(queue, nextInMs);
    });
    return look;
  }
}

function pollIntervalOf(queue: ParkedQueue): number {
  return Math.min(...queue.looks.map((look) => look.pollIntervalMs));
}
