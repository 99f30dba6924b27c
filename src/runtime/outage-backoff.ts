/** Waits between tries of a loop whose Redis call failed: 100 ms doubling to a cap, reset on success. */
export class OutageBackoff {
  private failures = 0;

  constructor(
    private readonly initialMs = 100,
    private readonly maxMs = 5_000,
  ) {}

  next(): number {
    const ms = Math.min(this.maxMs, this.initialMs * 2 ** this.failures);
    this.failures++;
    return ms * (0.5 + Math.random() / 2);
  }

  reset(): void {
    this.failures = 0;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts; never rejects. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
