import { AsyncLocalStorage } from 'node:async_hooks';

/** Small string map carried with an event: trace id, tenant id, logging fields. */
export type EventContext = Readonly<Record<string, string>>;

/** Per-service holder of the context of the handler currently running (AsyncLocalStorage). */
export class EventContextStore {
  private readonly storage = new AsyncLocalStorage<EventContext>();

  current(): EventContext | undefined {
    return this.storage.getStore();
  }

  run<R>(context: EventContext, fn: () => R): R {
    return this.storage.run(context, fn);
  }
}

export function isEventContext(value: unknown): value is EventContext {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  return Object.values(value).every((v) => typeof v === 'string');
}
