import type { LuaScripts } from './lua-scripts';
import type { TypeKeys } from './redis-layout';

interface Pending {
  readonly id: string;
  readonly attempt: number;
  resolve(completed: boolean): void;
  reject(error: unknown): void;
}

const MAX_BATCH = 1_000;

/** Gathers the successes of one tick into one complete.lua call: one round trip for many events. */
export class CompletionBatcher {
  private pending: Pending[] = [];

  constructor(private readonly keys: TypeKeys, private readonly scripts: LuaScripts) {}

  /** Resolves true when completed, false when the attempt was stale and nothing changed. */
  complete(id: string, attempt: number): Promise<boolean> {
    return new Promise((resolve, reject) => {
      if (this.pending.length === 0) setImmediate(() => this.flush());
      this.pending.push({ id, attempt, resolve, reject });
    });
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    for (let i = 0; i < batch.length; i += MAX_BATCH) {
      const chunk = batch.slice(i, i + MAX_BATCH);
      this.scripts.complete(this.keys, chunk).then(
        (flags) => chunk.forEach((p, j) => p.resolve(flags[j] === true)),
        (error: unknown) => chunk.forEach((p) => p.reject(error)),
      );
    }
  }
}
