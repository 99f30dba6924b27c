/**
 * The one shape of every background part (dispatchers, handler consumers
 * and the readers they own, the recurring-schedule loop, the repartitioner,
 * the errands beside them, the activity recorder, the wake-up listener,
 * metrics): started once, stopped once. stop() resolves when the part will
 * touch Redis no more, or when `timeoutMs` has passed for one that waits on
 * user code (a consumer's running handlers). docs/architecture.md gives the
 * order the service stops them in, and why.
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

/**
 * The one-off Redis calls made beside the loops (a group registration or a
 * queue's limits retried through an outage, a wake-up published when a hold
 * ends, an answer to instances()), under the same contract: run() starts one
 * unless stop() was called, a retry waits through after(), and stop()
 * resolves once those under way have ended. A retry waiting for its turn is
 * dropped: what it would have sent, the next instance to start sends. Work of
 * several calls checks the signal it is given before each: a call never
 * answered (a connection gone silent) is waited for a second at most, and
 * nothing follows it once stop() resolved.
 */
/** Longest Errands.stop() waits for an errand's answer. */
const ERRANDS_STOP_MS = 1_000;

export class Errands implements BackgroundService {
  private readonly stopping = new AbortController();
  private readonly running = new Set<Promise<unknown>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly stopHooks = new Set<() => void>();

  /**
   * Calls `hook` when stop() is called (at once when it was); returns what
   * forgets it. Work waiting for its turn ends its wait here: a plain set, for
   * an AbortSignal warns past ten listeners, and a type of many partitions
   * waits as many times at once.
   */
  onStop(hook: () => void): () => void {
    if (this.stopped) {
      hook();
      return () => undefined;
    }
    this.stopHooks.add(hook);
    return () => this.stopHooks.delete(hook);
  }

  /** Aborted by stop(): work that waits (a retry's backoff) ends its wait on it. */
  get signal(): AbortSignal {
    return this.stopping.signal;
  }

  get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  /** Errands run as they come: there is nothing to start. */
  start(): void {}

  /** Starts `work` now, unless stopped; stop() waits for it. Its failure is the work's own to handle. */
  run(work: (signal: AbortSignal) => Promise<unknown>): void {
    if (this.stopped) return;
    const running: Promise<unknown> = work(this.stopping.signal)
      .catch(() => undefined)
      .finally(() => this.running.delete(running));
    this.running.add(running);
  }

  /** Calls `work` after `ms`, unless stopped by then. */
  after(ms: number, work: () => void): void {
    if (this.stopped) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.stopped) work();
    }, ms);
    timer.unref();
    this.timers.add(timer);
  }

  /**
   * Waits for the errands under way up to `timeoutMs`, and at most a second:
   * one whose answer is later sends nothing more (each checks the signal
   * before its next call), so close() need not wait out a dead connection.
   */
  async stop(timeoutMs: number): Promise<void> {
    this.stopping.abort();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const hook of this.stopHooks) hook();
    this.stopHooks.clear();
    if (this.running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.min(timeoutMs, ERRANDS_STOP_MS))));
    await Promise.race([Promise.all(this.running), late]);
    clearTimeout(timer);
  }
}
