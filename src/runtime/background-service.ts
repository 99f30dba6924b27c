/**
 * The one shape of every background loop (dispatchers, handler consumers,
 * the recurring-schedule loop, the repartitioner): started once, stopped
 * once. stop() resolves when the loop will touch Redis no more, or when
 * `timeoutMs` has passed for one that waits on user code (a consumer's
 * running handlers). docs/architecture.md gives the order the service stops
 * them in, and why.
 */
export interface BackgroundService {
  start(): void;
  stop(timeoutMs: number): Promise<unknown>;
}

/**
 * A loop written as an async function of an abort signal, behind
 * start()/stop() (River's contract): stop() aborts the signal and resolves
 * once the function has returned. The function checks the signal before each
 * Redis call of a tick, not only between ticks, and ends its waits on it: a
 * call already sent is answered (or times out under its deadline), and nothing
 * is sent after stop() resolves. A loop that throws ends as if stopped.
 */
export class LoopService implements BackgroundService {
  private running: Promise<void> | undefined;
  private readonly stopping = new AbortController();

  constructor(private readonly loop: (signal: AbortSignal) => Promise<void>) {}

  /** Whether stop() was called: a tick under way checks it before each call. */
  get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  start(): void {
    if (this.stopping.signal.aborted) return;
    this.running ??= this.loop(this.stopping.signal).catch(() => undefined);
  }

  stop(): Promise<void> {
    this.stopping.abort();
    return this.running ?? Promise.resolve();
  }
}
