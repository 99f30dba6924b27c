import { AsyncLocalStorage } from 'node:async_hooks';

/** Small string map carried with an event: trace id, tenant id, logging fields. */
export type EventContext = Readonly<Record<string, string>>;

/**
 * Per-service holder of the context of the handler currently running
 * (AsyncLocalStorage). An empty context is no context: current() gives undefined.
 */
export class EventContextStore {
  private readonly storage = new AsyncLocalStorage<EventContext>();
  /** Whether any scope was ever entered; until then there is none around a call to hide. */
  private entered = false;

  current(): EventContext | undefined {
    const context = this.storage.getStore();
    return context && !isEmpty(context) ? context : undefined;
  }

  run<R>(context: EventContext, fn: () => R): R {
    // Entering a scope switches on Node's promise hooks for the whole process, a few
    // microseconds on every promise after; an empty context, with no scope around, needs none.
    if (!this.entered && isEmpty(context)) return fn();
    this.entered = true;
    return this.storage.run(context, fn);
  }
}

function isEmpty(context: EventContext): boolean {
  for (const _ in context) return false;
  return true;
}

export function isEventContext(value: unknown): value is EventContext {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  return Object.values(value).every((v) => typeof v === 'string');
}
