import { type Observable, firstValueFrom, isObservable } from 'rxjs';
import { describe } from '../core/errors';
import type { EventContext, EventContextStore } from '../core/event-context';
import type { FifoTimeouts } from './fifo-timeouts';

/** `true` is success; `false`, a throw, a rejection, an error or an empty Observable is a failure. */
export type HandlerResult = boolean | Promise<boolean> | Observable<boolean>;

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
  /** Aborted when the handler timeout passes: the service has given up on this attempt. */
  readonly signal: AbortSignal;
}

export type EventHandler<T> = (event: T, context: EventContext, delivery: Delivery) => HandlerResult;

/**
 * Wraps every handler call, inside the context's AsyncLocalStorage scope; for
 * example to set logging fields or open a tracing span. It must call `next`.
 */
export type ContextHandler = (context: EventContext, delivery: Delivery, next: () => Promise<boolean>) => Promise<boolean>;

export const passThroughContextHandler: ContextHandler = (_context, _delivery, next) => next();

export type Outcome = { readonly ok: true } | { readonly ok: false; readonly error: string; readonly timedOut: boolean };

const NO_VALUE = Symbol('no value');

/**
 * The Delivery a handler gets. The AbortController behind `signal` is made
 * only when a handler asks for it: most never do.
 */
export class HandlerDelivery implements Delivery {
  #controller: AbortController | undefined;

  constructor(
    readonly id: string,
    readonly type: string,
    readonly attempt: number,
    readonly maxAttempts: number,
    readonly dueAt: number,
    readonly enqueuedAt: number,
  ) {}

  get signal(): AbortSignal {
    return (this.#controller ??= new AbortController()).signal;
  }

  /** Aborts `signal`, if a handler ever asked for it. */
  abort(): void {
    this.#controller?.abort();
  }
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
    result =
      contextHandler === passThroughContextHandler
        ? contextStore.run(context, () => {
            const answer = handler(event, context, delivery);
            // An Observable is subscribed here, inside the context's scope.
            return typeof answer === 'boolean' ? answer : settle(() => answer);
          })
        : contextStore.run(context, () => contextHandler(context, delivery, () => settle(() => handler(event, context, delivery))));
  } catch (error) {
    return failed(error);
  }
  // A handler that answered at once has nothing left to time out.
  if (typeof result === 'boolean') return interpret(result);
  return new Promise<Outcome>((resolve) => {
    let done = false;
    const cancelTimeout = timeouts.start(() => {
      if (done) return;
      done = true;
      delivery.abort();
      resolve({ ok: false, timedOut: true, error: `handler did not finish within ${timeouts.ms} ms (attempt ${delivery.attempt})` });
    });
    (result as Promise<unknown>)
      .then(interpret, failed)
      .then((outcome) => {
        if (done) return;
        done = true;
        cancelTimeout();
        resolve(outcome);
      });
  });
}

function failed(error: unknown): Outcome {
  return { ok: false, timedOut: false, error: describe(error) };
}

async function settle(call: () => HandlerResult): Promise<boolean> {
  const result: unknown = call();
  if (isObservable(result)) {
    const first = await firstValueFrom(result as Observable<unknown>, { defaultValue: NO_VALUE });
    if (first === NO_VALUE) throw new Error('handler Observable completed without a result');
    return first as boolean;
  }
  return (await result) as boolean;
}

function interpret(result: unknown): Outcome {
  if (result === true) return { ok: true };
  if (result === false) return { ok: false, timedOut: false, error: 'handler returned false' };
  return { ok: false, timedOut: false, error: `handler returned ${describe(result)}; expected true or false` };
}
