import { Subscription, from, mergeMap } from 'rxjs';
import type { DelayedEventInstance, EventClass } from './delayed-event.decorator';
import { type DecodedEvent, type EventCodec, DecodeError } from './event-codec';
import type { EventContextStore } from './event-context';
import { type ContextHandler, type EventHandler, invokeHandler } from './handler-invocation';
import { HandlerSlots } from './handler-slots';
import type { LuaScripts } from './lua-scripts';
import { METRIC, type Metrics } from './metrics';
import { OutageBackoff, sleep } from './outage-backoff';
import type { ClaimedEvent, ReadyReader } from './ready-reader';
import type { TypeKeys } from './redis-layout';
import { type RetryPolicy, safeBackoff } from './retry-policy';

export interface ConsumerParts<T extends DelayedEventInstance> {
  readonly keys: TypeKeys;
  readonly eventClass: EventClass<T>;
  readonly handler: EventHandler<T>;
  readonly parallelism: number;
  readonly timeoutMs: number;
  readonly retry: RetryPolicy;
  readonly reader: ReadyReader;
  readonly scripts: LuaScripts;
  readonly codec: EventCodec;
  readonly metrics: Metrics;
  readonly contextStore: EventContextStore;
  readonly contextHandler: ContextHandler;
  /** Called when a retry was scheduled, so the local dispatcher looks again. */
  readonly onRetryScheduled: () => void;
}

/**
 * Runs one event type's handler: claimed events flow through at most
 * `parallelism` handler calls, and each outcome is recorded in Redis
 * (complete, retry with backoff, or dead letter), fenced by attempt.
 */
export class Consumer<T extends DelayedEventInstance> {
  private readonly slots: HandlerSlots;
  private readonly stopping = new AbortController();
  /** Aborted when close gave up waiting: stop retrying result writes, leases will redeliver. */
  private readonly abandoned = new AbortController();
  private subscription: Subscription | undefined;
  private finished: Promise<void> = Promise.resolve();
  private readonly tags: Record<string, string>;

  constructor(private readonly parts: ConsumerParts<T>) {
    this.slots = new HandlerSlots(parts.parallelism, () => parts.reader.slotFreed());
    this.tags = { type: parts.keys.tag };
  }

  get running(): number {
    return this.slots.running;
  }

  start(): void {
    this.finished = new Promise<void>((resolve) => {
      this.subscription = this.parts.reader
        .claimed$(this.slots, this.stopping.signal)
        .pipe(mergeMap((claimed) => from(this.handle(claimed)), this.parts.parallelism))
        .subscribe({ complete: resolve, error: resolve });
    });
  }

  /** Stops claiming, waits up to `timeoutMs` for running handlers; resolves true when all finished. */
  async stop(timeoutMs: number): Promise<boolean> {
    this.stopping.abort();
    const drained = await Promise.race([this.finished.then(() => true), sleep(timeoutMs).then(() => false)]);
    if (!drained) {
      this.abandoned.abort();
      this.subscription?.unsubscribe();
    }
    return drained;
  }

  private async handle(claimed: ClaimedEvent): Promise<void> {
    try {
      let decoded: DecodedEvent<T>;
      try {
        decoded = this.parts.codec.decode(this.parts.eventClass, claimed.id, claimed.body);
      } catch (error) {
        const reason = error instanceof DecodeError ? error.message : String(error);
        await this.record(() => this.parts.scripts.deadLetter(this.parts.keys, claimed.id, claimed.attempt, `undecodable: ${reason}`), 'decode');
        return;
      }
      this.parts.metrics.timing(METRIC.lateness, this.tags, Math.max(0, claimed.claimedAt - claimed.dueAt));
      const started = performance.now();
      const outcome = await invokeHandler({
        handler: this.parts.handler,
        event: decoded.event,
        context: decoded.context,
        delivery: {
          id: claimed.id,
          type: this.parts.keys.tag,
          attempt: claimed.attempt,
          maxAttempts: this.parts.retry.maxAttempts,
          dueAt: claimed.dueAt,
          enqueuedAt: decoded.enqueuedAt,
        },
        timeoutMs: this.parts.timeoutMs,
        contextStore: this.parts.contextStore,
        contextHandler: this.parts.contextHandler,
      });
      const result = outcome.ok ? 'success' : 'failure';
      this.parts.metrics.timing(METRIC.handlerDuration, { ...this.tags, outcome: result }, performance.now() - started);
      this.parts.metrics.count(METRIC.handled, { ...this.tags, outcome: result });
      if (outcome.ok) {
        await this.record(() => this.parts.reader.complete(claimed.id, claimed.attempt));
      } else if (claimed.attempt >= this.parts.retry.maxAttempts) {
        const reason = `${outcome.error} (attempt ${claimed.attempt} of ${this.parts.retry.maxAttempts})`;
        await this.record(() => this.parts.scripts.deadLetter(this.parts.keys, claimed.id, claimed.attempt, reason), 'attempts-exhausted');
      } else {
        const backoffMs = safeBackoff(this.parts.retry, claimed.attempt);
        const recorded = await this.record(async () => (await this.parts.scripts.retry(this.parts.keys, claimed.id, claimed.attempt, backoffMs, outcome.error)) !== undefined);
        if (recorded) {
          this.parts.metrics.count(METRIC.retries, this.tags);
          this.parts.onRetryScheduled();
        }
      }
    } finally {
      this.slots.give();
    }
  }

  /**
   * Writes an outcome, retrying through a Redis outage until it lands or the
   * consumer is abandoned (then the lease brings the event back). Returns
   * whether the write changed the event; false means the attempt was stale.
   */
  private async record(write: () => Promise<boolean>, deadLetterReason?: string): Promise<boolean> {
    const backoff = new OutageBackoff();
    while (!this.abandoned.signal.aborted) {
      try {
        const changed = await write();
        if (!changed) this.parts.metrics.count(METRIC.staleResults, this.tags);
        else if (deadLetterReason) this.parts.metrics.count(METRIC.deadLettered, { ...this.tags, reason: deadLetterReason });
        return changed;
      } catch {
        this.parts.metrics.count(METRIC.redisErrors, { loop: 'result', ...this.tags });
        await sleep(backoff.next(), this.abandoned.signal);
      }
    }
    return false;
  }
}
