import { type Observable, firstValueFrom, isObservable } from 'rxjs';
import type { DelayedEventInstance } from '../core/delayed-event.decorator';
import { type Delay, MAX_DELAY_MS } from '../core/duration';
import { Snoozed, type SnoozeOptions } from '../core/snoozed';
import { type DeliveryAbortCode, DeliveryAbortedError, InvalidArgumentError, PermanentFailure, UNPRINTABLE, describe, rateLimitedAsk, rateLimitedHoldOf } from '../core/errors';
import type { ChildResult } from '../redis/flow-store';
import { type DeliveryReports, MAX_LOG_LINE_BYTES, MAX_PROGRESS_BYTES, MAX_RESULT_BYTES, type ReportedCall, cutToBytes, jsonOf } from './delivery-reports';
import type { EventContext, EventContextStore } from '../core/event-context';
import type { FifoTimeouts } from './fifo-timeouts';
import type { HandledOutcome } from './outcomes';

/**
 * What a handler answers, at once, as a Promise or as an Observable (its first
 * value counts). Success: `true` or nothing (`undefined`, a Promise that
 * resolves to nothing, an Observable that completes without a value).
 * Failure, retried by the retry policy: `false`, any other value, a throw, a
 * rejection, an Observable error, or not finishing within the handler timeout.
 * Failure for good, dead-lettered at once: throwing (or rejecting, or erroring
 * the Observable with) a `PermanentFailure`.
 */
export type HandlerResult = boolean | void | Snoozed | Promise<boolean | void | Snoozed> | Observable<boolean | void | Snoozed>;

/** Facts about this delivery of the event, for handlers that care. */
export interface Delivery {
  readonly id: string;
  readonly type: string;
  /** 1 on the first attempt. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** When the event was due (Redis clock, ms). */
  readonly dueAt: number;
  readonly enqueuedAt: number;
  /** The subscriber group this handler belongs to: `default`, or its name. */
  readonly group: string;
  /**
   * Aborted when the service gives up on this call; its `reason` is a
   * DeliveryAbortedError (since 0.6) whose `code` says why: `timeout` (the
   * handler timeout passed), `shutdown` (close() stopped waiting) or
   * `lease-lost` (its lease could not be kept: the event may run elsewhere).
   */
  readonly signal: AbortSignal;
  /**
   * The provider said "too many requests" (an HTTP 429): whatever the handler
   * then answers, the event goes back to READY without spending an attempt,
   * and no instance starts another call of this type (and group) for `ms`
   * (e.g. its Retry-After). The same as throwing `new RateLimited(ms)`.
   */
  rateLimited(ms: number): void;
  /**
   * Snoozes this delivery (since 0.6): return what this gives
   * (`return delivery.snooze({ minutes: 5 })`) and the event comes again
   * after `delay`, without spending an attempt; `event` (same class and id)
   * replaces its payload. Only a returned (or thrown) marker snoozes: calling
   * this and returning something else does nothing. See `Snoozed`.
   */
  snooze(delay: Delay, options?: SnoozeOptions): Snoozed;
  /** How many times a handler snoozed this event so far (since 0.6). */
  readonly snoozes: number;
  /**
   * Reports how far this call got (since 0.6): a number or any JSON value of
   * up to 4 KiB as JSON; the last one wins. It is written within a quarter of
   * a second, with this call's attempt, and `find()` shows it (`progress`)
   * from any process until the next attempt starts. Throws
   * SerializationError for a value that is not JSON, InvalidArgumentError
   * for one too large.
   */
  progress(value: unknown): void;
  /**
   * Adds a line to the event's log (since 0.6): kept across attempts, the
   * last 100, each cut to 1 KiB, until the event is removed; `find()` shows
   * them (`logs`). Written within a quarter of a second, and before the call's
   * result.
   */
  log(line: string): void;
  /**
   * Records what this call produced (since 0.6): JSON of up to 64 KiB, the
   * last call wins. Kept with the handled event when keepHandled is on
   * (`find().result`); dropped if the attempt fails. Throws
   * SerializationError at once for a value that is not JSON,
   * InvalidArgumentError for one too large.
   */
  result(value: unknown): void;
  /**
   * A flow's parent (since 0.6, docs/flows.md): each child's outcome, keyed
   * `"type|id"`, with what its handler gave `delivery.result()` and, for a
   * failed child, its error. Copied into the parent's record as each child
   * settles, so it does not depend on keepHandled. Empty for an event that
   * waited for nothing.
   */
  childResults(): Promise<Readonly<Record<string, ChildResult>>>;
}

/**
 * Handles one event. Answer `true` or nothing when done (a plain `async`
 * function that returns nothing succeeds); `false` or throw to have it
 * retried; throw `new PermanentFailure('reason')` to dead-letter it at once.
 */
export type EventHandler<T> = (event: T, context: EventContext, delivery: Delivery) => HandlerResult;

/**
 * Wraps every handler call, inside the context's AsyncLocalStorage scope; for
 * example to set logging fields or open a tracing span. It must call `next`
 * and return (or resolve to) what `next` resolves to: `true` when the handler
 * succeeded (a handler that answered nothing resolves `true` here), `false`
 * when it answered false; a handler's throw or rejection rejects `next`.
 * Resolving `undefined` is a failure here, so a wrapper that forgets to return
 * the result never turns failures into successes.
 */
export type ContextHandler = (context: EventContext, delivery: Delivery, next: () => Promise<boolean>) => Promise<boolean>;

export const passThroughContextHandler: ContextHandler = (_context, _delivery, next) => next();

export type Outcome =
  | { readonly ok: true }
  | {
      readonly ok: false;
      /** What is recorded as the event's error. */
      readonly error: string;
      /** What the handler failed with, for the retry policy: its throw or rejection, or an Error describing the failure. */
      readonly cause: unknown;
      readonly timedOut: boolean;
      /** A PermanentFailure: dead-letter at once. */
      readonly permanent: boolean;
      /** A RateLimited: back to READY, attempt unspent, the queue held this long (ms). */
      readonly rateLimitedMs?: number;
      /** What a RateLimited asked for, as text, when it was out of range (then the hold is one second). */
      readonly rateLimitedRefused?: string;
      /** A snooze: back to SCHEDULED after this long, attempt unspent; `event` replaces the payload. */
      readonly snooze?: { readonly ms: number; readonly event: DelayedEventInstance | undefined };
    };

const SUCCESS: Outcome = Object.freeze({ ok: true });
const NO_VALUE = Symbol('no value');

/**
 * The Delivery a handler gets. The AbortController behind `signal` is made
 * only when a handler asks for it: most never do.
 */
export class HandlerDelivery implements Delivery {
  #controller: AbortController | undefined;
  /** What rateLimited() asked for, if it was called. */
  heldForMs: number | undefined;
  /** A value rateLimited() was called with that is out of range, as text. */
  heldRefused: string | undefined;

  /** The call's result as JSON, once result() was called. */
  #result: string | undefined;

  constructor(
    readonly id: string,
    readonly type: string,
    readonly attempt: number,
    readonly maxAttempts: number,
    readonly dueAt: number,
    readonly enqueuedAt: number,
    readonly group = 'default',
    readonly snoozes = 0,
    /** Where progress and log lines go, and the call they belong to; none for a Delivery made by hand. */
    private readonly reportsTo?: DeliveryReports,
    private readonly call?: ReportedCall,
  ) {}

  progress(value: unknown): void {
    const json = jsonOf(value, this.type, 'The progress of a call', 'progress', MAX_PROGRESS_BYTES);
    if (this.call) this.reportsTo?.progress(this.call, this.attempt, json);
  }

  log(line: string): void {
    if (typeof line !== 'string') throw new InvalidArgumentError('line', `delivery.log takes a string, got ${describe(line)}`);
    if (this.call) this.reportsTo?.log(this.call, this.attempt, cutToBytes(line, MAX_LOG_LINE_BYTES));
  }

  result(value: unknown): void {
    this.#result = jsonOf(value, this.type, 'The result of a call', 'result', MAX_RESULT_BYTES);
  }

  childResults(): Promise<Readonly<Record<string, ChildResult>>> {
    return this.call && this.reportsTo ? this.reportsTo.childResults(this.call) : Promise.resolve({});
  }

  /** The result recorded with result(), as JSON. */
  get resultJson(): string | undefined {
    return this.#result;
  }

  snooze(delay: Delay, options?: SnoozeOptions): Snoozed {
    return new Snoozed(delay, options);
  }

  get signal(): AbortSignal {
    return (this.#controller ??= new AbortController()).signal;
  }

  rateLimited(ms: number): void {
    const hold = rateLimitedHoldOf(ms);
    this.heldForMs = Math.max(this.heldForMs ?? 0, hold.ms);
    if (hold.refused !== undefined) this.heldRefused = hold.refused;
  }

  /** Aborts `signal` with a DeliveryAbortedError; the first reason stands. The controller is made here only when aborting (rare). */
  abort(code: DeliveryAbortCode, detail: string): void {
    const controller = (this.#controller ??= new AbortController());
    if (!controller.signal.aborted) controller.abort(new DeliveryAbortedError(code, detail));
  }

  /**
   * The outcome once the result is written (HandledOutcome), for integrations
   * that report it. One field, set only when one asks: every call makes a
   * Delivery, and few are asked (an A/B at parallelism 1 showed the fields).
   */
  #written: HandledOutcome | { outcome?: HandledOutcome; resolve?: (outcome: HandledOutcome) => void; promise?: Promise<HandledOutcome> } | undefined;

  whenWritten(): Promise<HandledOutcome> {
    const known = this.#written;
    if (typeof known === 'string') return Promise.resolve(known);
    const cell = known ?? (this.#written = {});
    if (cell.outcome !== undefined) return Promise.resolve(cell.outcome);
    cell.promise ??= new Promise<HandledOutcome>((resolve) => (cell.resolve = resolve));
    return cell.promise;
  }

  /** The consumer wrote the result: this is what became of the call. */
  written(outcome: HandledOutcome): void {
    const cell = this.#written;
    if (typeof cell === 'object') {
      cell.outcome = outcome;
      cell.resolve?.(outcome);
    } else {
      this.#written = outcome;
    }
  }
}

/**
 * What became of a call (HandledOutcome: success, failure, snoozed,
 * rate-limited or stale), once its result is written; since 0.6. For a
 * contextHandler that reports it, as the OpenTelemetry integration does
 * after `next()` settles: the result is written after the handler returns,
 * so a handler that awaits its own outcome waits for good. Undefined for a
 * Delivery the service did not make.
 */
export function outcomeWritten(delivery: Delivery): Promise<HandledOutcome> | undefined {
  return delivery instanceof HandlerDelivery ? delivery.whenWritten() : undefined;
}

export interface Invocation<T> {
  readonly handler: EventHandler<T>;
  readonly event: T;
  readonly context: EventContext;
  readonly delivery: HandlerDelivery;
  /** The handler timeout; shared by all calls of one handler. */
  readonly timeouts: FifoTimeouts;
  readonly contextStore: EventContextStore;
  readonly contextHandler: ContextHandler;
}

/**
 * Runs one handler call to an Outcome; never rejects. A handler that answers
 * at once (no I/O to wait for) gets its Outcome at once: a Promise would cost
 * each such call an allocation and a turn of the event loop's job queue.
 */
export function invokeHandler<T>(invocation: Invocation<T>): Outcome | Promise<Outcome> {
  const { handler, event, context, delivery, timeouts, contextStore, contextHandler } = invocation;
  let result: unknown;
  try {
    if (contextHandler === passThroughContextHandler) {
      result = contextStore.run(context, () => {
        const answer = handler(event, context, delivery);
        // An Observable is subscribed here, inside the context's scope.
        return answer === undefined || typeof answer === 'boolean' ? answer : settle(() => answer);
      });
      // A handler that answered at once has nothing left to time out.
      if (result === undefined || typeof result === 'boolean') return interpret(result);
    } else {
      result = contextStore.run(context, () => contextHandler(context, delivery, () => settle(() => handler(event, context, delivery))));
    }
  } catch (error) {
    return failed(error);
  }
  const interpretResult = contextHandler === passThroughContextHandler ? interpret : interpretWrapped;
  return new Promise<Outcome>((resolve) => {
    let done = false;
    const cancelTimeout = timeouts.start(() => {
      if (done) return;
      done = true;
      const error = `handler did not finish within ${timeouts.ms} ms (attempt ${delivery.attempt})`;
      delivery.abort('timeout', error);
      resolve({ ok: false, timedOut: true, permanent: false, error, cause: new Error(error) });
    });
    // Promise.resolve: a context handler may answer anything, a thenable whose then() throws included.
    Promise.resolve(result)
      .then(interpretResult, failed)
      .then((outcome) => {
        if (done) return;
        done = true;
        cancelTimeout();
        resolve(outcome);
      });
  });
}

/** Never throws, whatever `error` is (a Proxy whose traps throw, an Error whose message getter does). */
/**
 * What a handler's throw (or an Error it returned for an event of a batch)
 * means: a hold it asked for (RateLimited), a PermanentFailure (no retry), or
 * a failure to retry. The one rule for single and batch handlers. Never
 * throws, whatever was thrown.
 */
export function failed(error: unknown): Outcome {
  if (Snoozed.is(error)) return snoozedOutcome(error);
  const hold = rateLimitedAsk(error);
  if (hold !== undefined) return rateLimitedOutcome(hold, error);
  if (PermanentFailure.is(error)) {
    let reason: string;
    try {
      reason = String(error.message);
    } catch {
      reason = UNPRINTABLE;
    }
    return { ok: false, timedOut: false, permanent: true, error: `permanent failure: ${reason}`, cause: error };
  }
  return { ok: false, timedOut: false, permanent: false, error: describe(error), cause: error };
}

/** A failure to retry that the handler did not throw (it returned false, or something unexpected): `error` says what. */
export function failure(error: string): Outcome {
  return { ok: false, timedOut: false, permanent: false, error, cause: new Error(error) };
}

/** The handler's answer, awaited; nothing (success) becomes `true`, as a context handler's `next` promises. */
async function settle(call: () => HandlerResult): Promise<boolean> {
  const result: unknown = call();
  if (isObservable(result)) {
    const first = await firstValueFrom(result as Observable<unknown>, { defaultValue: NO_VALUE });
    return first === NO_VALUE || first === undefined ? true : (first as boolean);
  }
  const answer = await result;
  return answer === undefined ? true : (answer as boolean);
}

function interpret(result: unknown): Outcome {
  if (result === true || result === undefined) return SUCCESS;
  if (result === false) return failure('handler returned false');
  if (Snoozed.is(result)) return snoozedOutcome(result);
  return failure(`handler returned ${describe(result)}; expected true or false (or nothing, for success)`);
}

/** A context handler's answer: it must pass on what `next` resolved to, so nothing is not a success here. */
function interpretWrapped(result: unknown): Outcome {
  if (result === undefined) return failure('contextHandler resolved undefined; it must return (or resolve to) the result of next()');
  return interpret(result);
}

/** The outcome of a call that said its provider rate-limited it. */
export function rateLimitedOutcome(hold: { readonly ms: number; readonly refused?: string }, cause: unknown): Outcome {
  return {
    ok: false,
    timedOut: false,
    permanent: false,
    error: `rate-limited for ${hold.ms} ms`,
    cause,
    rateLimitedMs: hold.ms,
    ...(hold.refused !== undefined ? { rateLimitedRefused: hold.refused } : {}),
  };
}

/** The outcome of a call that snoozed its event; a Snoozed of another copy of the package is read with care. */
export function snoozedOutcome(snoozed: Snoozed): Outcome {
  let ms: unknown;
  let event: unknown;
  try {
    ms = snoozed.delayMs;
    event = snoozed.event;
  } catch {
    return failure('handler snoozed with a Snoozed whose delay cannot be read');
  }
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 0 || ms > MAX_DELAY_MS) return failure(`handler snoozed for ${describe(ms)}; a snooze's delay is 0 to 100 years`);
  const replacement = event === undefined || event === null || typeof event !== 'object' ? undefined : (event as DelayedEventInstance);
  return { ok: false, timedOut: false, permanent: false, error: `snoozed for ${ms} ms`, cause: snoozed, snooze: { ms, event: replacement } };
}
