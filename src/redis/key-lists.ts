import type { TypeKeys } from './redis-layout';
import type { LoadedScript, ScriptName } from './script-calls';

/**
 * Scripts every handled queue calls while idle, neither hot: their KEYS are
 * named on each call, so an idle handled type keeps no list of them
 * (src/redis/queue-key-names.ts, benchmarks/MANY-TYPES-RESULTS.md).
 */
const UNCACHED: ReadonlySet<ScriptName> = new Set<ScriptName>(['dispatch-due', 'register-group']);

/**
 * The KEYS of a call of a script on a queue, in the order its header declares
 * them (`-- KEYS[n] <name>:`, scripts/embed-lua.mjs), or of its `variant`.
 * Built once per queue and script for the hot calls: the same TypeKeys object
 * comes back for a queue (src/redis/redis-layout.ts), so they build nothing.
 * Keys that are no TypeKeys field (claimLog) are given by the caller.
 */
export class KeyLists {
  private readonly lists = new WeakMap<TypeKeys, Map<string, string[]>>();

  of(script: LoadedScript, keys: TypeKeys, extra?: { readonly claimLog: string }, variant?: string): string[] {
    const name = script.name;
    const names = variant === undefined ? script.keys : script.variants[variant];
    if (!names) throw new Error(`lua/${name}.lua declares no KEYS(${variant})`);
    const cacheKey = variant === undefined ? name : `${name}(${variant})`;
    const kept = !extra && !UNCACHED.has(name);
    let perQueue = kept ? this.lists.get(keys) : undefined;
    const cached = perQueue?.get(cacheKey);
    if (cached) return cached;
    const fields = keys as unknown as Record<string, unknown>;
    const list = names.map((key) => {
      const value = key === 'claimLog' ? extra?.claimLog : fields[key];
      if (typeof value !== 'string') throw new Error(`lua/${name}.lua declares key '${key}', which is no field of TypeKeys (src/redis/redis-layout.ts)`);
      return value;
    });
    if (kept) {
      if (!perQueue) this.lists.set(keys, (perQueue = new Map()));
      perQueue.set(cacheKey, list);
    }
    return list;
  }
}
