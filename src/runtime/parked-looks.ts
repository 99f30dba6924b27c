import type { LuaScripts } from '../redis/lua-scripts';
import type { TypeKeys } from '../redis/redis-layout';
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
  /** The keys its readers claim from: events waiting there (not in another group's list) wake it. */
  readonly readerKeys: readonly TypeKeys[];
  /** Applies the flow notices asked for meanwhile (lookEverywhere pokes them); rejects like any Redis call. */
  afterLooks(): Promise<void>;
  /** Its loops are made again: a look found work, or the queue needs them. */
  wake(): void;
  /** The look asked for next sweeps the queue's flow notices (lookEverywhere). */
  pokeFlows(): void;
}

interface Planned {
  readonly timer: NodeJS.Timeout;
  /** When (performance.now()) it fires. */
  readonly at: number;
}

/**
 * The looks of every parked queue of an instance, made here instead of by
 * their dispatchers: the same script call, when a quiet dispatcher would have
 * made it (its next due time, or its quiet look, or at once on a wake-up with
 * a due time). A look that moves events, finds events ready for its readers,
 * or finds the queue paused wakes the queue: its loops are made again, and
 * claim at once. So a handled type costs its loops' memory only while it is
 * active (benchmarks/MANY-TYPES-RESULTS.md), and the safety nets of
 * src/runtime/quiet-looks.ts keep their bounds: while wake-ups do not reach
 * this instance (check()), a parked queue looks every pollIntervalMs.
 */
export class ParkedLooks {
  private readonly planned = new Map<ParkedQueue, Planned>();
  /** Looks under way, by queue: forget() and stop() wait for them. */
  private readonly looking = new Map<ParkedQueue, Promise<void>>();
  /** Looks under way when another was asked for (a wake-up, lookEverywhere): each looks again once answered. */
  private readonly lookAgain = new Set<ParkedQueue>();
  /** Queues whose last look failed (an outage): each backs off on its own, as its dispatcher would. */
  private readonly failing = new Map<ParkedQueue, OutageBackoff>();
  /** How many times every queue was asked to look: a queue being parked meanwhile looks at once. */
  private everywhere = 0;
  private stopped = false;

  constructor(
    private readonly scripts: () => LuaScripts,
    private readonly metrics: Metrics,
    /** Whether wake-ups reach this instance end to end: else a parked queue looks every pollIntervalMs. */
    private readonly listening: () => boolean,
  ) {}

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
    this.plan(queue, inMs);
  }

  /** Stops looking at `queue`; resolves once a look of it under way is answered (nothing follows it). */
  forget(queue: ParkedQueue): Promise<void> {
    clearTimeout(this.planned.get(queue)?.timer);
    this.planned.delete(queue);
    this.lookAgain.delete(queue);
    this.failing.delete(queue);
    const look = this.looking.get(queue);
    this.looking.delete(queue);
    return look ?? Promise.resolve();
  }

  /** Every parked queue looks now (lookEverywhere: an instance went silent, the subscription came back). */
  lookEverywhere(): void {
    this.everywhere++;
    for (const queue of [...this.planned.keys(), ...this.looking.keys()]) {
      queue.pokeFlows();
      this.lookNow(queue);
    }
  }

  /** A wake-up for `queue` (something falls due sooner, a resume): it looks now, as its dispatcher would; again after a look under way. */
  lookNow(queue: ParkedQueue): void {
    if (this.looking.has(queue)) this.lookAgain.add(queue);
    else if (this.planned.has(queue)) this.plan(queue, 0);
  }

  /** Whether wake-ups reach this instance changed: those that no longer do look within pollIntervalMs, not later than planned. */
  check(): void {
    if (this.listening()) return;
    for (const queue of [...this.planned.keys()]) this.plan(queue, pollIntervalOf(queue));
  }

  /** No more looks; resolves once those under way are answered. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const { timer } of this.planned.values()) clearTimeout(timer);
    this.planned.clear();
    const looking = [...this.looking.values()];
    this.looking.clear();
    this.lookAgain.clear();
    this.failing.clear();
    await Promise.all(looking);
  }

  /** Its next look within `inMs`: never later than one planned already. */
  private plan(queue: ParkedQueue, inMs: number): void {
    const at = performance.now() + Math.max(0, inMs);
    const planned = this.planned.get(queue);
    if (planned && planned.at <= at) return;
    clearTimeout(planned?.timer);
    const timer = setTimeout(() => {
      this.planned.delete(queue);
      this.looking.set(queue, this.look(queue));
    }, at - performance.now());
    timer.unref();
    this.planned.set(queue, { timer, at });
  }

  private look(queue: ParkedQueue): Promise<void> {
    // Forgotten (woken, removed, stopped) while its look ran: what the look says is not acted on.
    const forgotten = () => this.stopped || this.looking.get(queue) !== look;
    const look = Promise.resolve().then(async () => {
      let nextInMs = Number.POSITIVE_INFINITY;
      try {
        for (const spec of queue.looks) {
          const result = await dispatchOnce(spec, this.scripts(), this.metrics, forgotten);
          if (forgotten()) return;
          // Work here, or a paused queue (readyWaiting -1), whose looks come every pollIntervalMs: its loops again.
          const ready = result.readyWaiting < 0 || (result.readyWaiting > 0 && queue.readerKeys.includes(spec.keys));
          if (result.movedDue + result.movedExpired + result.handedToGroups > 0 || ready) {
            this.forget(queue).catch(() => undefined);
            queue.wake();
            return;
          }
          const untilNext = result.nextDue < 0 ? Number.POSITIVE_INFINITY : Math.max(0, result.nextDue - result.now);
          nextInMs = Math.min(nextInMs, untilNext, quietLookIn(quietEveryMs(spec)));
        }
        await queue.afterLooks();
        this.failing.delete(queue);
        // Wake-ups no longer reach this instance: its next look within pollIntervalMs (not after a failed one: that backs off).
        if (!this.listening()) nextInMs = Math.min(nextInMs, pollIntervalOf(queue));
      } catch {
        if (forgotten()) return;
        this.metrics.count(METRIC.redisErrors, { loop: 'dispatcher', type: queue.looks[0]?.keys.type ?? '' });
        let backoff = this.failing.get(queue);
        if (!backoff) this.failing.set(queue, (backoff = new OutageBackoff()));
        nextInMs = backoff.next();
      }
      if (forgotten()) return;
      this.looking.delete(queue);
      // Asked again meanwhile: at once.
      if (this.lookAgain.delete(queue)) nextInMs = 0;
      this.plan(queue, nextInMs);
    });
    return look;
  }
}

function pollIntervalOf(queue: ParkedQueue): number {
  return Math.min(...queue.looks.map((look) => look.pollIntervalMs));
}
