/**
 * A loop's alarm clock: wait() resolves at the next wake(), after `ms`, or at
 * once if a wake came since the last clear(). Plain resolvers, no AbortSignal:
 * loops wake thousands of times a second, and every abort builds an exception
 * with a stack trace.
 */
export class Wakeup {
  private pending = false;
  private resolve: (() => void) | undefined;

  wake(): void {
    const resolve = this.resolve;
    if (resolve) {
      this.resolve = undefined;
      resolve();
    } else {
      this.pending = true;
    }
  }

  /** Forgets wakes that came before: the caller is about to look for itself. */
  clear(): void {
    this.pending = false;
  }

  wait(ms = Infinity): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = Number.isFinite(ms) ? setTimeout(() => this.wake(), ms) : undefined;
      this.resolve = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
