import { createHash } from 'node:crypto';
import type { Cluster } from 'ioredis';
import { LUA_SOURCES } from './lua-sources.generated';
import { type ScriptPermissions, isPermissionError, permissionError } from './permissions';
import { type ReadyGate, isUnsent, nextReady } from './ready-gate';
import type { RedisClient } from './redis-client';

// How a script of lua/ is loaded and sent: by SHA, and by text once Redis
// says it does not hold it; what a refusal or a cluster redirection means.

export const SCRIPT_NAMES = [
  'enqueue',
  'dispatch-due',
  'complete-and-claim',
  'retry',
  'dead-letter',
  'cancel',
  'replay-dead',
  'purge-dead',
  'release-claim',
  'release-unstarted',
  'register-group',
  'remove-group',
  'reschedule',
  'advance-schedule',
  'upgrade-bodies',
  'upgrade-schedule',
  'migrate-out',
  'migrate-in',
  'migrate-done',
  'rate-limited',
  'snooze',
  'wake-waiters',
  'peek-ready',
  'classify',
  'drain',
  'clean',
  'obliterate',
  'renew-leases',
  'report-calls',
  'flow-park',
  'flow-link',
  'flow-notice',
  'flow-record',
] as const;
export type ScriptName = (typeof SCRIPT_NAMES)[number];

export interface LoadedScript {
  readonly name: ScriptName;
  readonly lua: string;
  readonly sha: string;
  readonly numberOfKeys: number;
  /** Its keys by name, in order, from its header; and the shorter sets it also takes. */
  readonly keys: readonly string[];
  readonly variants: Readonly<Record<string, readonly string[]>>;
  /** What an ACL user needs to run it. */
  readonly commands: readonly string[];
}

/**
 * A script of lua/, its `-- @include name` lines inlined from lua/includes, and
 * the number of keys its header declares (its `-- KEYS[n]` lines). The scripts
 * are compiled in (src/redis/lua-sources.generated.ts, written from lua/ by
 * `npm run embed-lua`): nothing is read from disk, so bundles work too.
 */
export function loadLua(name: string): { lua: string; numberOfKeys: number; keys: readonly string[]; variants: Readonly<Record<string, readonly string[]>>; commands: readonly string[] } {
  const script = Object.hasOwn(LUA_SOURCES, name) ? LUA_SOURCES[name as keyof typeof LUA_SOURCES] : undefined;
  if (!script) throw new Error(`reactive-delayed-events: no Lua script '${name}' (lua/${name}.lua); after adding one, run npm run embed-lua`);
  return { lua: script.lua, numberOfKeys: script.keys.length, keys: script.keys, variants: script.variants, commands: script.commands };
}

export function loadScript(name: ScriptName): LoadedScript {
  const { lua, numberOfKeys, keys, variants, commands } = loadLua(name);
  return { name, lua, numberOfKeys, keys, variants, commands, sha: createHash('sha1').update(lua).digest('hex') };
}

/** NOSCRIPT: Redis does not hold the script (it restarted, or a replica that never ran it took over). */
export function isMissingScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * EVALSHA, and EVAL (which caches the script again) only when Redis answers
 * NOSCRIPT: a call that got NOSCRIPT ran nothing, so sending it again is safe.
 * ioredis's defineCommand does the same but cost ~4 µs more a call, a few
 * percent of an event at parallelism 1 (measured with the benchmarks).
 */
export function evalScript(
  client: RedisClient,
  script: LoadedScript,
  args: ReadonlyArray<string | number>,
  numberOfKeys = script.numberOfKeys,
  permissions?: ScriptPermissions,
  gate?: ReadyGate,
  unsentRetries = 1,
): Promise<unknown> {
  return client.evalsha(script.sha, numberOfKeys, ...args).then(undefined, (error: unknown) => {
    if (isPermissionError(error)) throw refused(script, error, permissions);
    // Not sent (the connection is being replaced): sending it once it is back is safe.
    if (isUnsent(error) && unsentRetries > 0) {
      return (gate ? gate.next() : nextReady(client)).then(() => evalScript(client, script, args, numberOfKeys, permissions, gate, unsentRetries - 1));
    }
    if (!isMissingScript(error)) throw error;
    return client.eval(script.lua, numberOfKeys, ...args).then(undefined, (again: unknown) => {
      throw isPermissionError(again) ? refused(script, again, permissions) : again;
    });
  });
}

/** A NOPERM, which the permission check should have prevented (an ACL narrowed since): every answer is asked again. */
function refused(script: LoadedScript, error: unknown, permissions: ScriptPermissions | undefined): Error {
  permissions?.forget();
  // Redis names the command it refused: the call itself (EVALSHA, EVAL), or one the script runs.
  const command = error instanceof Error ? /run the '([^']+)' command/.exec(error.message)?.[1]?.toUpperCase() : undefined;
  const what =
    command === 'EVALSHA' || command === 'EVAL'
      ? `${command}, which runs every script of the service`
      : command
        ? `${command}, which the ${script.name} script runs`
        : `a command of the ${script.name} script`;
  const typed = permissionError(what, error);
  permissions?.refused(typed, typed.message, true);
  return typed;
}

/** By its flag, not instanceof: a Cluster of ioredis 5 is no instance of ioredis 6's class. */
export function isCluster(client: RedisClient): client is Cluster {
  return client.isCluster;
}

/** A cluster's answer that the slot is elsewhere or moving: the command ran nowhere. */
export function isRedirection(error: unknown): error is Error {
  return error instanceof Error && /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(error.message);
}

/**
 * After MOVED, waits for a fresh slot map, so the next call goes to the slot's
 * new master; after ASK, TRYAGAIN or CLUSTERDOWN (a slot moving, a failover under
 * way), waits as ioredis itself would before trying again.
 */
export function followRedirection(cluster: Cluster, error: Error): Promise<void> {
  if (error.message.startsWith('MOVED ')) return new Promise((resolve) => cluster.refreshSlotsCache(() => resolve()));
  const delay = error.message.startsWith('CLUSTERDOWN ') ? cluster.options.retryDelayOnClusterDown : cluster.options.retryDelayOnTryAgain;
  return new Promise((resolve) => setTimeout(resolve, delay ?? 100));
}
