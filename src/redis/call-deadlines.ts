import { RedisCallTimeoutError } from '../core/errors';

interface Pending {
  readonly deadline: number;
  readonly name: string;
  readonly ms: number;
  readonly reject: (error: unknown) => void;
}

/**
 * Gives every Redis call a deadline. A call that outlives it (a frozen Redis,
 * a half-open socket) fails like an outage and `onStuck` may reset the
 * connection. One sweeping timer serves all calls in flight: a timer and a
 * Promise.race per call cost more than the enqueue they guard.
 */
export class CallDeadlines {
  private readonly pending = new Set<Pending>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    readonly defaultMs: number,
    private readonly onStuck: () => void,
  ) {}

  bound<R>(call: Promise<R>, name: string, ms = this.defaultMs): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const entry: Pending = { deadline: performance.now() + ms, name, ms, reject };
      this.pending.add(entry);
      this.ensureSweeping();
      call.then(
        (value) => {
          this.pending.delete(entry);
          resolve(value);
        },
        (error: unknown) => {
          this.pending.delete(entry);
          reject(error);
        },
      );
    });
  }

  /** Fails every call in flight now with `error(name)`, as when the connection that carried them closed. */
  failAll(error: (name: string) => unknown): void {
    for (const entry of this.pending) entry.reject(error(entry.name));
    this.pending.clear();
  }

  private ensureSweeping(): void {
    if (this.sweeper) return;
    // A quarter of the shortest deadline: a stuck call fails within 1.25× its deadline.
    const every = Math.max(5, Math.floor(this.defaultMs / 4));
    this.sweeper = setInterval(() => this.sweep(), every);
    this.sweeper.unref();
  }

  private sweep(): void {
    const now = performance.now();
    let stuck = false;
    for (const entry of this.pending) {
      if (entry.deadline > now) continue;
      this.pending.delete(entry);
      entry.reject(new RedisCallTimeoutError(entry.name, entry.ms));
      stuck = true;
    }
    if (stuck) this.onStuck();
    if (this.pending.size === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }
}
