import { type Subscription, merge } from 'rxjs';
import type { BackgroundService, Errands } from './background-service';
import type { DeadRetention } from '../redis/lua-scripts';
import type { HandledOutcome } from './outcomes';
import type { DelayedEventInstance, EventClass } from '../core/delayed-event.decorator';
import { type DecodedEvent, type EventCodec, DecodeError } from '../core/event-codec';
import type { EventContextStore } from '../core/event-context';
import { type ContextHandler, type EventHandler, HandlerDelivery, type Outcome, failure, invokeHandler } from './handler-invocation';
import { bodyWithExtras } from '../core/stored-body';
import { MAX_ERROR_BYTES, boundErrorText, describe } from '../core/errors';
import type { TypeActivity } from './activity-log';
import { FifoTimeouts } from './fifo-timeouts';
import { HandlerSlots } from './handler-slots';
import { HoldEnds } from './hold-ends';
import { LeaseKeeper } from './lease-keeper';
import type { KeyLabels } from './key-labels';
import { CallReports } from './call-reports';
import type { LuaScripts } from '../redis/lua-scripts';
import { METRIC, type Metrics } from './metrics';
import { OutageBackoff, sleep } from './outage-backoff';
import type { ClaimedEvent, ReadyReader } from './ready-reader';
import type { TypeKeys } from '../redis/redis-layout';
import { type RetryPolicy, safeBackoff } from '../core/retry-policy';

/** One queue of the handler's type: the whole type, or one of its partitions. */
export interface ConsumerQueue {
  readonly keys: TypeKeys;
  readonly reader: ReadyReader;
  /** Called when a retry was scheduled in this queue, so its local dispatcher looks again. */
  readonly onRetryScheduled: () => void;
}

export interface ConsumerParts<T extends DelayedEventInstance> {
  readonly type: string;
  /** The subscriber group these handlers belong to: `default`, or its name. */
  readonly group: string;
  readonly queues: readonly ConsumerQueue[];
  readonly eventClass: EventClass<T>;
  readonly handler: EventHandler<T>;
  readonly parallelism: number;
  /** Most events the readers hold claimed ahead of free slots, while the handler is quick (HandlerSlots). */
  readonly prefetch: number;
  readonly timeoutMs: number;
  /** Lease renewals of running calls (since 0.6): how often, and how long each keeps a lease (0, 0: none). */
  readonly heartbeat: { readonly everyMs: number; readonly leaseMs: number };
  readonly retry: RetryPolicy;
  readonly scripts: LuaScripts;
  readonly codec: EventCodec;
  readonly metrics: Metrics;
  readonly contextStore: EventContextStore;
  readonly contextHandler: ContextHandler;
  /** Counts for the fleet's activity charts (option recordActivity), if kept. */
  readonly activity?: TypeActivity;
  /** A concurrency limit applies: a result that ends a call wakes the instances waiting for room. */
  readonly limited?: boolean;
  /** Snoozes an event may take before it is dead-lettered (reason snoozes-exhausted). */
  readonly maxSnoozes: number;
  /** Dead letters the group keeps (keepDead; 0: no limit): trimmed as events are dead-lettered. */
  readonly keepDead?: DeadRetention;
  /** A hold this consumer set (rate-limited) ended: the readers of every instance should look now. */
  readonly onHoldEnded?: (keys: TypeKeys) => void;
  /** Lateness per key (HandlerOptions.keyMetrics): each event's key label, bounded. */
  readonly keyLabels?: KeyLabels<T>;
  /** Where its one-off calls run (the wake-up of instances waiting for room): close() waits for them. */
  readonly errands: Errands;
}

/**
 * Runs one event type's handler: claimed events from all its queues flow
 * through at most `parallelism` handler calls, and each outcome is recorded in
 * Redis (complete, retry with backoff, or dead letter), fenced by the claim.
 */
export class Consumer<T extends DelayedEventInstance> implements BackgroundService {
  private readonly slots: HandlerSlots;
  /** One per queue: a type with many partitions must not pile listeners onto one signal. */
  private readonly stopping: AbortController[];
  /** Aborted when close gave up waiting: stop retrying result writes, leases will redeliver. */
  private readonly abandoned = new AbortController();
  private subscription: Subscription | undefined;
  private finished: Promise<void> = Promise.resolve();
  /** Claimed events whose handling (the call and its result) has not ended. */
  private handling = 0;
  private readonly tags: { readonly type: string; readonly group: string };
  private readonly retryScheduled = new Map<string, () => void>();
  private readonly timeouts: FifoTimeouts;
  /** The holds it set: their ends wake the readers. */
  private readonly holds = new HoldEnds((keys) => this.parts.onHoldEnded?.(keys));
  /** The running calls' leases, renewed by heartbeats and given up at shutdown. */
  protected readonly leases: LeaseKeeper;
  /** Progress and log lines its calls report (delivery.progress, delivery.log). */
  private readonly reports: CallReports;

  constructor(protected readonly parts: ConsumerParts<T>) {
    this.slots = new HandlerSlots(parts.parallelism, parts.prefetch);
    this.timeouts = new FifoTimeouts(parts.timeoutMs);
    this.reports = new CallReports(parts.scripts, parts.metrics);
    this.leases = new LeaseKeeper(parts.scripts, parts.metrics, { type: parts.type, group: parts.group }, parts.heartbeat.everyMs, parts.heartbeat.leaseMs);
    this.stopping = parts.queues.map(() => new AbortController());
    this.tags = { type: parts.type, group: parts.group };
    for (const queue of parts.queues) this.retryScheduled.set(queue.keys.tag, queue.onRetryScheduled);
  }

  get running(): number {
    return this.slots.running;
  }

  /** Nothing of it is under way here: no event handled, no result written, no hold's end to say. Its queues may be parked. */
  get idle(): boolean {
    return this.handling === 0 && this.slots.running === 0 && !this.holds.pending;
  }

  start(): void {
    this.finished = new Promise<void>((resolve) => {
      let claiming = true;
      const resolveWhenIdle = () => {
        if (!claiming && this.handling === 0) resolve();
      };
      const handled = () => {
        this.handling--;
        resolveWhenIdle();
      };
      const stopped = () => {
        claiming = false;
        resolveWhenIdle();
      };
      // The readers hand on no more events than there are free slots: each starts at once, no operator queues them.
      this.subscription = merge(...this.parts.queues.map((queue, i) => queue.reader.claimed$(this.slots, this.stopping[i]!.signal))).subscribe({
        next: (claimed) => {
          this.handling++;
          this.handle(claimed).then(handled, handled);
        },
        complete: stopped,
        error: stopped,
      });
    });
  }

  /** Stops claiming, waits up to `timeoutMs` for running handlers; resolves true when all finished. */
  async stop(timeoutMs: number): Promise<boolean> {
    for (const controller of this.stopping) controller.abort();
    // A result written after this (a call that ends while we wait) sets no timer: nothing wakes from here once stopped.
    this.holds.stop();
    // The wait is cut short when the handlers finish: its timer must not keep the process alive after close().
    const waiting = new AbortController();
    const drained = await Promise.race([this.finished.then(() => true), sleep(timeoutMs, waiting.signal).then(() => false)]);
    waiting.abort();
    if (!drained) {
      // No result is written from here; calls still running are told (shutdown), their leases lapse unstarted (unspent).
      this.abandoned.abort();
      await this.leases.abandon();
      this.subscription?.unsubscribe();
    } else {
      this.leases.stop();
    }
    await this.reports.stop();
    return drained;
  }

  /** A slot's give-back, once: as soon as no handler call runs in it, before the result is written. */
  protected slotOf(): (durationMs?: number) => void {
    let holdsSlot = true;
    return (durationMs?: number) => {
      if (!holdsSlot) return;
      holdsSlot = false;
      this.slots.give(1, durationMs);
    };
  }

  /** The claimed event decoded, or why it cannot be (then deadLetterUndecodable). Not async: every event passes here. */
  protected decode(claimed: ClaimedEvent): DecodedEvent<T> | { readonly undecodable: string } {
    try {
      const decoded = this.parts.codec.decode(this.parts.eventClass, claimed.id, claimed.body);
      const metrics = this.parts.metrics;
      const late = Math.max(0, claimed.claimedAt - claimed.dueAt);
      if (metrics.listening) metrics.timing(METRIC.lateness, this.tags, late);
      if (metrics.listening && this.parts.keyLabels) metrics.timing(METRIC.keyLateness, { ...this.tags, key: this.parts.keyLabels.of(decoded.event) }, late);
      return decoded;
    } catch (error) {
      return { undecodable: error instanceof DecodeError ? error.message : String(error) };
    }
  }

  /** Dead-letters an event that cannot be decoded, with the reason. */
  protected async deadLetterUndecodable(claimed: ClaimedEvent, reason: string): Promise<void> {
    if (this.parts.metrics.noticing) this.noticeDeadLetter(claimed, 'decode', `undecodable: ${reason}`, claimed.body);
    const dead = await this.record(() => this.parts.scripts.deadLetter(claimed.keys, claimed, `undecodable: ${reason}`, this.parts.keepDead), 'decode');
    this.wakeWaiters(claimed.keys, dead);
  }

  /** A Delivery for a claimed event, as its handler gets it. */
  protected deliveryOf(claimed: ClaimedEvent, decoded: DecodedEvent<T>): HandlerDelivery {
    const { extras } = decoded;
    const maxAttempts = extras.maxAttempts ?? this.parts.retry.maxAttempts;
    return new HandlerDelivery(claimed.id, this.parts.type, claimed.attempt, maxAttempts, claimed.dueAt, decoded.enqueuedAt, this.parts.group, extras.snoozes ?? 0, this.reports, claimed);
  }

  protected async handle(claimed: ClaimedEvent): Promise<void> {
    // The slot is given back as soon as no handler call runs in it, before the result is written:
    // the next event starts while the write rides on the reader's next call.
    const giveSlot = this.slotOf();
    try {
      const decoded = this.decode(claimed);
      if ('undecodable' in decoded) {
        giveSlot();
        await this.deadLetterUndecodable(claimed, decoded.undecodable);
        return;
      }
      const metrics = this.parts.metrics;
      const delivery = this.deliveryOf(claimed, decoded);
      this.leases.hold(claimed, delivery);
      const started = performance.now();
      let outcome: Outcome;
      try {
        const invoked = invokeHandler({
          handler: this.parts.handler,
          event: decoded.event,
          context: decoded.context,
          delivery,
          timeouts: this.timeouts,
          contextStore: this.parts.contextStore,
          contextHandler: this.parts.contextHandler,
        });
        outcome = invoked instanceof Promise ? await invoked : invoked;
      } catch (error) {
        // invokeHandler never rejects; should anything get past it, the call still fails and the event moves on.
        outcome = { ok: false, timedOut: false, permanent: false, error: describe(error), cause: error };
      }
      const durationMs = performance.now() - started;
      giveSlot(durationMs);
      const handled = await this.settle(claimed, decoded.event, outcome, delivery);
      if (metrics.listening) metrics.timing(METRIC.handlerDuration, { ...this.tags, outcome: handled }, durationMs);
    } finally {
      giveSlot();
      this.leases.release(claimed);
    }
  }

  /**
   * Records one event's outcome (complete, rate-limited, dead letter or retry), fenced by its claim, and counts it
   * as what it turned out to be (src/runtime/outcomes.ts): a result fenced off is `stale`, whatever the handler said.
   */
  protected async settle(claimed: ClaimedEvent, event: T, outcome: Outcome, delivery: HandlerDelivery): Promise<HandledOutcome> {
    let handled: HandledOutcome = 'stale';
    this.leases.ending(claimed);
    try {
      // What the call reported goes first, so that its lines are there for the next attempt (rarely anything).
      const reported = this.reports.written(claimed);
      if (reported) await reported;
      const done = delivery.resultJson === undefined ? claimed : { id: claimed.id, claim: claimed.claim, result: delivery.resultJson };
      // Every success passes here: one await, as before outcomes were named (an A/B showed another hop).
      if (outcome.ok && delivery.heldForMs === undefined) handled = (await this.record(() => claimed.reader.complete(done))) ? 'success' : 'stale';
      else handled = await this.writeOther(claimed, event, outcome, delivery);
    } finally {
      // An integration waits for it (a span ends with it): said whatever happened.
      delivery.written(handled);
    }
    const metrics = this.parts.metrics;
    this.parts.activity?.handled(handled, claimed.claimedAt - claimed.dueAt);
    if (metrics.listening) metrics.count(METRIC.handled, { ...this.tags, outcome: handled });
    return handled;
  }

  /** What a call that did not simply succeed writes: a hold, a snooze, a dead letter or a retry. */
  private async writeOther(claimed: ClaimedEvent, event: T, outcome: Outcome, delivery: HandlerDelivery): Promise<HandledOutcome> {
    const keys = claimed.keys;
    const metrics = this.parts.metrics;
    const hold = delivery.heldForMs ?? (outcome.ok ? undefined : outcome.rateLimitedMs);
    if (hold !== undefined) {
      const refused = delivery.heldRefused ?? (outcome.ok ? undefined : outcome.rateLimitedRefused);
      if (refused !== undefined && metrics.noticing) metrics.notice({ kind: 'hold-refused', type: this.parts.type, group: this.parts.group, asked: refused });
      // The provider's word: back to READY, attempt unspent, and every instance holds off until the hold ends.
      let heldForMs = hold;
      const givenBack = await this.record(async () => {
        const result = await this.parts.scripts.rateLimited(keys, claimed, hold);
        heldForMs = result.heldForMs;
        return result.givenBack;
      });
      if (givenBack) metrics.count(METRIC.rateLimited, this.tags);
      this.holds.set(keys, heldForMs);
      this.wakeWaiters(keys);
      return givenBack ? 'rate-limited' : 'stale';
    }
    if (outcome.ok) {
      const done = delivery.resultJson === undefined ? claimed : { id: claimed.id, claim: claimed.claim, result: delivery.resultJson };
      return (await this.record(() => claimed.reader.complete(done))) ? 'success' : 'stale';
    }
    if (outcome.snooze && delivery.snoozes < this.parts.maxSnoozes) return this.snooze(claimed, event, outcome.snooze, delivery);
    if (outcome.snooze) {
      const reason = `snoozed ${delivery.snoozes} times, as many as maxSnoozes allows (attempt ${claimed.attempt} of ${delivery.maxAttempts})`;
      if (metrics.noticing) this.noticeDeadLetter(claimed, 'snoozes-exhausted', reason, event);
      const dead = await this.record(() => this.parts.scripts.deadLetter(keys, claimed, reason, this.parts.keepDead), 'snoozes-exhausted');
      this.wakeWaiters(keys, dead);
      return dead ? 'failure' : 'stale';
    }
    if (outcome.permanent || claimed.attempt >= delivery.maxAttempts) {
      const attempt = ` (attempt ${claimed.attempt} of ${delivery.maxAttempts})`;
      // Cut before the attempt is added, so that what is stored still says which attempt it was.
      const reason = `${boundErrorText(outcome.error, MAX_ERROR_BYTES - attempt.length)}${attempt}`;
      if (this.parts.metrics.noticing) this.noticeDeadLetter(claimed, outcome.permanent ? 'permanent' : 'attempts-exhausted', reason, event);
      const dead = await this.record(() => this.parts.scripts.deadLetter(keys, claimed, reason, this.parts.keepDead), outcome.permanent ? 'permanent' : 'attempts-exhausted');
      this.wakeWaiters(keys, dead);
      return dead ? 'failure' : 'stale';
    }
    const backoffMs = safeBackoff(this.parts.retry, claimed.attempt, outcome.cause, event);
    const recorded = await this.record(async () => (await this.parts.scripts.retry(keys, claimed, backoffMs, outcome.error)) !== undefined);
    if (recorded) {
      this.parts.metrics.count(METRIC.retries, this.tags);
      this.retryScheduled.get(keys.tag)?.();
    }
    this.wakeWaiters(keys);
    return recorded ? 'failure' : 'stale';
  }

  /**
   * A snooze: back to SCHEDULED after its delay with the attempt unspent and
   * the snooze counted in the body (lua/snooze.lua). A new payload must be
   * the same class and id; refused (a failure, retried) otherwise, or when
   * the type has more than one group.
   */
  private async snooze(claimed: ClaimedEvent, event: T, snooze: { readonly ms: number; readonly event: DelayedEventInstance | undefined }, delivery: HandlerDelivery): Promise<HandledOutcome> {
    const keys = claimed.keys;
    const given = snooze.event;
    let body: string | undefined;
    let refusal: string | undefined;
    if (given !== undefined && (!(given instanceof this.parts.eventClass) || given.id !== claimed.id)) {
      refusal = `snooze's event must be a ${this.parts.eventClass.name} with id ${JSON.stringify(claimed.id)}`;
    } else {
      try {
        // Decoded again (it was, to call the handler): a snooze is rare, and the call needs none of this.
        const stored = this.parts.codec.decode(this.parts.eventClass, claimed.id, claimed.body);
        const extras = { ...stored.extras, snoozes: delivery.snoozes + 1 };
        body = given ? this.parts.codec.encode(given, stored.context, stored.enqueuedAt, extras).body : bodyWithExtras(claimed.body, extras);
      } catch (error) {
        refusal = `snooze's event cannot be stored (${describe(error)})`;
      }
    }
    if (body === undefined) return this.writeOther(claimed, event, failure(`invalid snooze: ${refusal ?? 'the stored body cannot take a snooze count'}`), delivery);
    let refused = false;
    const snoozed = await this.record(async () => {
      const due = await this.parts.scripts.snooze(keys, claimed, snooze.ms, body, given !== undefined);
      refused = due === 'refused';
      return typeof due === 'number';
    });
    if (refused) {
      const text = `invalid snooze: a new event is refused while ${this.parts.type} has more than one subscriber group; snooze without { event }`;
      return this.writeOther(claimed, event, failure(text), delivery);
    }
    if (snoozed) {
      this.parts.metrics.count(METRIC.snoozed, this.tags);
      this.retryScheduled.get(keys.tag)?.();
    }
    this.wakeWaiters(keys);
    return snoozed ? 'snoozed' : 'stale';
  }

  /**
   * Writes an outcome, retried through an outage until it lands or the consumer is abandoned (the lease brings the
   * event back); false: the attempt was stale. Not async: the first write nearly always lands, only a failed one loops.
   */
  private record(write: () => Promise<boolean>, deadLetterReason?: string): Promise<boolean> {
    if (this.abandoned.signal.aborted) return Promise.resolve(false);
    return write().then(
      (changed) => this.recorded(changed, deadLetterReason),
      () => this.recordThroughOutage(write, deadLetterReason),
    );
  }

  private async recordThroughOutage(write: () => Promise<boolean>, deadLetterReason: string | undefined): Promise<boolean> {
    const backoff = new OutageBackoff();
    for (;;) {
      this.parts.metrics.count(METRIC.redisErrors, { loop: 'result', type: this.parts.type });
      await sleep(backoff.next(), this.abandoned.signal);
      if (this.abandoned.signal.aborted) return false;
      try {
        return this.recorded(await write(), deadLetterReason);
      } catch {
        // Counted and retried at the top of the loop.
      }
    }
  }

  /** A call ended other than by success (a success rides on the claim, and wakes from there): room under the limit; a dead letter may have released a trailing payload or queued a flow notice. */
  private wakeWaiters(keys: TypeKeys, dead = false): void {
    if (dead) this.retryScheduled.get(keys.tag)?.();
    if (this.parts.limited) this.parts.errands.run(() => this.parts.scripts.wakeWaiters(keys));
  }

  private noticeDeadLetter(claimed: ClaimedEvent, reason: string, error: string, payload: unknown): void {
    this.parts.metrics.notice({ kind: 'dead-letter', ...this.tags, id: claimed.id, attempt: claimed.attempt, reason, error: boundErrorText(error), payload });
  }

  private recorded(changed: boolean, deadLetterReason: string | undefined): boolean {
    if (!changed) this.parts.metrics.count(METRIC.staleResults, this.tags);
    else if (deadLetterReason) {
      this.parts.metrics.count(METRIC.deadLettered, { ...this.tags, reason: deadLetterReason });
      this.parts.activity?.deadLettered(1);
    }
    return changed;
  }
}
