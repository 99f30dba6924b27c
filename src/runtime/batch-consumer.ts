import { type Observable, firstValueFrom, isObservable } from 'rxjs';
import type { DelayedEventInstance } from '../core/delayed-event.decorator';
import { PermanentFailure, RateLimited, describe } from '../core/errors';
import { Snoozed } from '../core/snoozed';
import type { DecodedEvent } from '../core/event-codec';
import type { EventContext } from '../core/event-context';
import { Consumer, type ConsumerParts } from './consumer';
import { FifoTimeouts } from './fifo-timeouts';
import { type Delivery, type HandlerDelivery, type Outcome, failed, failure } from './handler-invocation';
import type { HandledOutcome } from './outcomes';
import { METRIC } from './metrics';
import type { ClaimedEvent } from './ready-reader';

/**
 * What a batch handler answers, at once, as a Promise or as an Observable
 * (its first value): nothing or `true`, every event succeeded; `false` (or a
 * throw), every event failed; an array of one outcome per event, in order
 * (`true` or nothing: success; `false` or an Error: failure; a
 * `PermanentFailure`: dead letter; a `RateLimited`: back, attempt unspent;
 * a `Snoozed`, as `deliveries[i].snooze(delay)` gives: again after the delay);
 * or an array of the ids that failed (the others succeeded).
 */
export type BatchResult = boolean | void | ReadonlyArray<boolean | void | Error | undefined> | readonly string[];
export type BatchHandlerResult = BatchResult | Promise<BatchResult> | Observable<BatchResult>;

/** Handles a batch of events of one type, each with its context and delivery (its own attempt, retries and dead letter). */
export type BatchHandler<T> = (events: T[], contexts: EventContext[], deliveries: Delivery[]) => BatchHandlerResult;

export interface BatchSettings<T> {
  readonly handler: BatchHandler<T>;
  /** Most events in one call. */
  readonly maxBatch: number;
  /** How long the first event of a batch waits for more before the call. */
  readonly maxWaitMs: number;
  /** Most calls at once. */
  readonly calls: number;
}

interface Waiting<T> {
  readonly claimed: ClaimedEvent;
  readonly decoded: DecodedEvent<T>;
  readonly delivery: HandlerDelivery;
  readonly giveSlot: (durationMs?: number) => void;
  readonly done: () => void;
}

const SUCCESS: Outcome = Object.freeze({ ok: true });
const NO_VALUE = Symbol('no value');

/**
 * A Consumer whose handler takes events in batches: claimed events (each
 * holding a slot, so limits count events) gather until `maxBatch` are there
 * or the first has waited `maxWaitMs`, then go to one call, at most `calls`
 * at once. Each event's outcome is recorded on its own, fenced by its claim,
 * as a single handler's would be.
 */
export class BatchConsumer<T extends DelayedEventInstance> extends Consumer<T> {
  private waiting: Array<Waiting<T>> = [];
  private timer: NodeJS.Timeout | undefined;
  private calling = 0;
  private readonly batchTimeouts: FifoTimeouts;

  constructor(
    parts: ConsumerParts<T>,
    private readonly batch: BatchSettings<T>,
  ) {
    super(parts);
    this.batchTimeouts = new FifoTimeouts(parts.timeoutMs);
  }

  protected override handle(claimed: ClaimedEvent): Promise<void> {
    const giveSlot = this.slotOf();
    const decoded = this.decode(claimed);
    if ('undecodable' in decoded) {
      giveSlot();
      return this.deadLetterUndecodable(claimed, decoded.undecodable);
    }
    return new Promise<void>((resolve) => {
      const delivery = this.deliveryOf(claimed, decoded);
      // Kept alive while it gathers and runs; released once its result is written, or it will not run.
      this.leases.hold(claimed, delivery);
      const done = () => {
        this.leases.release(claimed);
        resolve();
      };
      this.waiting.push({ claimed, decoded, delivery, giveSlot, done });
      if (this.waiting.length >= this.batch.maxBatch) this.flush();
      else this.timer ??= setTimeout(() => this.flush(), this.batch.maxWaitMs);
    });
  }

  /** Starts a call with what waits, if a call may start. */
  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.calling >= this.batch.calls || this.waiting.length === 0) return;
    const batch = this.waiting.splice(0, this.batch.maxBatch);
    this.calling++;
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      this.calling--;
      // What gathered meanwhile goes now if it is a full batch or has waited long enough; else its timer runs.
      if (this.waiting.length >= this.batch.maxBatch) this.flush();
      else if (this.waiting.length > 0) this.timer ??= setTimeout(() => this.flush(), this.batch.maxWaitMs);
    };
    void this.run(batch, end).finally(end);
  }

  /** One call and its results; `ended` frees its call slot once the call itself has ended. */
  private async run(gathered: Array<Waiting<T>>, ended: () => void): Promise<void> {
    const batch = await this.confirmed(gathered);
    if (batch.length === 0) return;
    const { metrics } = this.parts;
    const tags = { type: this.parts.type, group: this.parts.group };
    metrics.count(METRIC.batches, tags);
    metrics.count(METRIC.batchedEvents, tags, batch.length);
    const started = performance.now();
    const outcomes = await invokeBatch(this.batch.handler, batch, this.batchTimeouts);
    // The call has ended: the next may start while these results are written (an outage may hold the writes).
    ended();
    const durationMs = performance.now() - started;
    for (const w of batch) w.giveSlot(durationMs / batch.length);
    const handled = await Promise.all(
      batch.map(async (w, i) => {
        try {
          return await this.settle(w.claimed, w.decoded.event, outcomes[i]!, w.delivery);
        } finally {
          w.done();
        }
      }),
    );
    // One timing per call: its outcome is its events' when they share one, else `failure` if any failed.
    if (metrics.listening) metrics.timing(METRIC.handlerDuration, { ...tags, outcome: callOutcome(handled) }, durationMs);
  }

  /**
   * The gathered events that may still start, as their readers confirm them
   * (ReadyReader.confirm): a cancel, replace or pause that ran before means
   * the call never sees the event (it is gone, or went back unstarted); its
   * slot is freed here.
   */
  private async confirmed(gathered: Array<Waiting<T>>): Promise<Array<Waiting<T>>> {
    const byReader = new Map<Waiting<T>['claimed']['reader'], Array<Waiting<T>>>();
    const keep = new Set<Waiting<T>>();
    for (const w of gathered) {
      const list = byReader.get(w.claimed.reader);
      if (list) list.push(w);
      else byReader.set(w.claimed.reader, [w]);
    }
    await Promise.all(
      [...byReader].map(async ([reader, waiting]) => {
        const answers = await reader.confirm(waiting.map((w) => w.claimed));
        waiting.forEach((w, i) => {
          if (answers[i]) keep.add(w);
        });
      }),
    );
    const batch = gathered.filter((w) => keep.has(w));
    for (const w of gathered) {
      if (keep.has(w)) continue;
      w.giveSlot();
      w.done();
    }
    return batch;
  }

  override async stop(timeoutMs: number): Promise<boolean> {
    // What waits for a batch is handled now: its slots hold back the stop.
    const stopping = super.stop(timeoutMs);
    this.flushAll();
    return stopping;
  }

  private flushAll(): void {
    while (this.waiting.length > 0 && this.calling < this.batch.calls) this.flush();
  }
}

/** One call of a batch handler to an outcome per event; never rejects, whatever the handler does. */
async function invokeBatch<T>(handler: BatchHandler<T>, batch: ReadonlyArray<Waiting<T>>, timeouts: FifoTimeouts): Promise<Outcome[]> {
  const events = batch.map((w) => w.decoded.event);
  const contexts = batch.map((w) => w.decoded.context);
  const deliveries = batch.map((w) => w.delivery);
  const all = (outcome: Outcome) => batch.map(() => outcome);
  let answer: Promise<unknown>;
  try {
    const result: unknown = handler(events, contexts, deliveries);
    answer = isObservable(result) ? firstValueFrom(result as Observable<unknown>, { defaultValue: NO_VALUE }).then((first) => (first === NO_VALUE ? undefined : first)) : Promise.resolve(result);
  } catch (error) {
    return all(failed(error));
  }
  return new Promise<Outcome[]>((resolve) => {
    let done = false;
    const cancel = timeouts.start(() => {
      if (done) return;
      done = true;
      const error = `batch handler did not finish within ${timeouts.ms} ms`;
      for (const d of deliveries) d.abort('timeout', error);
      resolve(all({ ok: false, timedOut: true, permanent: false, error, cause: new Error(error) }));
    });
    answer
      .then(
        (value) => outcomesOf(value, batch),
        (error: unknown) => all(failed(error)),
      )
      .then((outcomes) => {
        if (done) return;
        done = true;
        cancel();
        resolve(outcomes);
      });
  });
}

/** What a batch handler answered, as an outcome per event. Never throws. */
function outcomesOf<T>(value: unknown, batch: ReadonlyArray<Waiting<T>>): Outcome[] {
  try {
    if (value === undefined || value === true) return batch.map(() => SUCCESS);
    if (value === false) return batch.map(() => failure('batch handler returned false'));
    if (Array.isArray(value)) {
      if (value.length > 0 && value.every((v) => typeof v === 'string')) {
        const failedIds = new Set(value as string[]);
        return batch.map((w) => (failedIds.has(w.claimed.id) ? failure('batch handler reported it failed') : SUCCESS));
      }
      if (value.length === 0 && batch.length > 0) return batch.map(() => SUCCESS);
      if (value.length !== batch.length) {
        return batch.map(() => failure(`batch handler returned ${value.length} outcomes for ${batch.length} events; return one per event, in order, or the ids that failed`));
      }
      return value.map((v: unknown) => {
        if (v === true || v === undefined) return SUCCESS;
        if (v === false) return failure('batch handler returned false for it');
        if (v instanceof Error || PermanentFailure.is(v) || RateLimited.holdOf(v) !== undefined || Snoozed.is(v)) return failed(v);
        return failure(`batch handler returned ${describe(v)} for it; expected true, false, an Error or a snooze`);
      });
    }
    return batch.map(() => failure(`batch handler returned ${describe(value)}; expected nothing, a boolean, an outcome per event or the ids that failed`));
  } catch (error) {
    return batch.map(() => failed(error));
  }
}

/** A batch call's outcome, for its one timing: its events' when they share one; else `failure` if any failed, else the first not `success`. */
function callOutcome(handled: readonly HandledOutcome[]): HandledOutcome {
  const first = handled[0] ?? 'success';
  if (handled.every((h) => h === first)) return first;
  if (handled.includes('failure')) return 'failure';
  return handled.find((h) => h !== 'success') ?? 'success';
}
