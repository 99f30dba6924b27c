/**
 * The one shape of every background loop (dispatchers, handler consumers,
 * the recurring-schedule loop): started once, stopped once. stop() resolves
 * when the loop will touch Redis no more, or when `timeoutMs` has passed for
 * one that waits on user code (a consumer's running handlers).
 * docs/architecture.md gives the order the service stops them in, and why.
 */
export interface BackgroundService {
  start(): void;
  stop(timeoutMs: number): Promise<unknown>;
}

/** A loop written as a cold Observable (it runs while subscribed), behind start()/stop(). */
export class SubscribedLoop implements BackgroundService {
  private subscription: { unsubscribe(): void } | undefined;

  constructor(private readonly loop: { subscribe(): { unsubscribe(): void } }) {}

  start(): void {
    this.subscription ??= this.loop.subscribe();
  }

  stop(): Promise<void> {
    this.subscription?.unsubscribe();
    return Promise.resolve();
  }
}
