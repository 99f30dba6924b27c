import type { EnqueueStatus, ScheduledBody } from '../redis/lua-scripts';
import type { EnqueuePolicy } from '../redis/script-results';
import type { TypeKeys } from '../redis/redis-layout';

/**
 * Events per script call: enough to amortise the call, few enough that Redis
 * is never held for long and that a large batch leaves as several calls, the
 * later ones written while Redis runs the first (1,000 events as four calls
 * stored ~7% faster than as one, in alternating runs).
 */
export const ENQUEUE_CHUNK = 250;

/**
 * Single enqueues gathered in one tick leave in calls of this many as they
 * come, not all at the end of the tick: Redis runs one call while Node
 * prepares the next, instead of each waiting for the other. While the tick
 * goes on the calls grow, each as large as all those that left before it in
 * the tick (up to ENQUEUE_CHUNK): a burst of thousands of enqueues then costs
 * Redis fewer, larger calls, where events with scattered due times share
 * their buckets' writes (2,000 events due at random within 40 ms: ~8 µs of
 * Redis time each in calls of 32, ~5.5 in calls of 250).
 */
export const EARLY_FLUSH = 32;

interface Waiter {
  /** Given the statuses of the whole call: its own are `count` from `from`. */
  readonly resolve: (statuses: EnqueueStatus[]) => void;
  readonly reject: (error: unknown) => void;
}

interface PendingCall {
  readonly keys: TypeKeys;
  readonly policy: EnqueuePolicy;
  readonly events: ScheduledBody[];
  readonly waiters: Waiter[];
}

/**
 * Coalesces the enqueues of one queue made in the same tick into few script
 * calls. Callers that each await their own enqueue (64 requests in flight, say)
 * then cost Redis a script run per 32 events instead of one per event, which is
 * where a script's time goes: its calls, not the work they do. Nothing waits
 * on a timer: a call leaves when EARLY_FLUSH events have gathered or at the end
 * of the tick, so a lone enqueue is not delayed. Calls go out in the order they
 * were opened, on one connection, so Redis sees the enqueues in call order.
 */
export class EnqueueBatcher {
  /** Calls being gathered, in the order they were opened, by pendingKey(). */
  private readonly pending = new Map<string, PendingCall>();
  /** Events of single enqueues sent so far this tick, by pendingKey(): the next call may be as large. */
  private readonly sentThisTick = new Map<string, number>();
  private flushScheduled = false;

  constructor(private readonly store: (keys: TypeKeys, events: ScheduledBody[], policy: EnqueuePolicy) => Promise<EnqueueStatus[]>) {}

  /** Stores `events` (all of the queue `keys`); statuses in the order given. */
  submit(keys: TypeKeys, events: readonly ScheduledBody[], policy: EnqueuePolicy): Promise<EnqueueStatus[]> {
    const parts: Array<Promise<EnqueueStatus[]>> = [];
    for (let start = 0; start < events.length; ) {
      const call = this.callFor(keys, policy);
      const count = Math.min(ENQUEUE_CHUNK - call.events.length, events.length - start);
      const from = call.events.length;
      for (let i = start; i < start + count; i++) call.events.push(events[i]!);
      parts.push(new Promise((resolve, reject) => call.waiters.push({ resolve: (statuses) => resolve(statuses.slice(from, from + count)), reject })));
      start += count;
      if (call.events.length >= ENQUEUE_CHUNK) this.send(call);
      else if (events.length < EARLY_FLUSH && call.events.length >= this.earlyFlushAt(call)) this.sendEarly(call);
    }
    if (parts.length === 1) return parts[0]!;
    return Promise.all(parts).then((statuses) => statuses.flat());
  }

  /**
   * submit() of one event, its status told to `resolve` (or the error to
   * `reject`) straight from the call's reply: a single enqueue's reply then
   * passes through one promise fewer before its caller goes on.
   */
  submitOne(keys: TypeKeys, event: ScheduledBody, policy: EnqueuePolicy, resolve: (status: EnqueueStatus) => void, reject: (error: unknown) => void): void {
    const call = this.callFor(keys, policy);
    const from = call.events.length;
    call.events.push(event);
    call.waiters.push({ resolve: (statuses) => resolve(statuses[from]!), reject });
    if (call.events.length >= this.earlyFlushAt(call)) this.sendEarly(call);
  }

  /** How many single enqueues a call gathers before it leaves early: EARLY_FLUSH, growing through the tick. */
  private earlyFlushAt(call: PendingCall): number {
    return Math.min(ENQUEUE_CHUNK, Math.max(EARLY_FLUSH, this.sentThisTick.get(pendingKey(call.keys, call.policy)) ?? 0));
  }

  private sendEarly(call: PendingCall): void {
    const key = pendingKey(call.keys, call.policy);
    this.sentThisTick.set(key, (this.sentThisTick.get(key) ?? 0) + call.events.length);
    this.send(call);
  }

  private callFor(keys: TypeKeys, policy: EnqueuePolicy): PendingCall {
    const key = pendingKey(keys, policy);
    let call = this.pending.get(key);
    if (!call) {
      call = { keys, policy, events: [], waiters: [] };
      this.pending.set(key, call);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        // nextTick runs after the promise jobs now queued: every caller woken
        // by the previous reply has enqueued again by then.
        process.nextTick(() => this.flush());
      }
    }
    return call;
  }

  /** Sends every gathered call now; close() calls it before the connections go. */
  flush(): void {
    this.flushScheduled = false;
    this.sentThisTick.clear();
    for (const call of [...this.pending.values()]) this.send(call);
  }

  private send(call: PendingCall): void {
    this.pending.delete(pendingKey(call.keys, call.policy));
    this.store(call.keys, call.events, call.policy).then(
      (statuses) => {
        for (const w of call.waiters) w.resolve(statuses);
      },
      (error: unknown) => {
        for (const w of call.waiters) w.reject(error);
      },
    );
  }
}

/**
 * A queue's plain calls go under its tag as it is, with no string built per
 * enqueue; its other calls under their mode, window and '|' before the tag: no
 * tag holds a '|' (type names may not), so they never meet.
 */
function pendingKey(keys: TypeKeys, policy: EnqueuePolicy): string {
  return policy.mode === '' ? keys.tag : `${policy.mode}${policy.ms}|${keys.tag}`;
}
