import type { RedisClient } from './redis-client';
import { DEFAULT_GROUP, type RedisLayout, type TypeKeys } from './redis-layout';

/** A queue's limits as stored (lua/includes/limit-keys.lua): what every instance's claims obey. */
export interface StoredLimits {
  /** At most `max` calls start per `perMs`. */
  readonly rate?: { readonly max: number; readonly perMs: number };
  /** At most this many calls run at once. */
  readonly concurrency?: number;
  /** Events are shared out per key (HandlerOptions.key), each key within these limits. */
  readonly perKey?: { readonly rate?: { readonly max: number; readonly perMs: number }; readonly concurrency?: number };
}

/** What the queue's limits are using now, for inspection. */
export interface LimitUse extends StoredLimits {
  /** Calls started within the last `perMs` (with a rate limit). */
  readonly started?: number;
  /** Calls running (leases held). */
  readonly running: number;
  /** ms left of a hold a handler asked for (rateLimited), if any. */
  readonly heldForMs?: number;
  /** ms left of a pause while the type's partitions change (claims wait so that the limits hold across both settings), if any. */
  readonly pausedForMoveMs?: number;
  /** Keys with ready events waiting their turn (HandlerOptions.key), when any. */
  readonly keysWaiting?: number;
  /**
   * Per key (HandlerOptions.key; since 0.6): how many of its events wait and
   * how many of its calls run, for the KEYS_SHOWN keys with the most waiting
   * (then the most running), most first.
   */
  readonly keys?: ReadonlyArray<{ readonly key: string; readonly waiting: number; readonly running: number }>;
}

/** Keys limits() lists with their use: the busiest, a bounded answer however many keys there are. */
export const KEYS_SHOWN = 100;
/** Keys read to find them: a queue with more waiting keys lists the busiest of those read. */
const KEYS_READ = 1_000;

/** The busiest keys of a queue sorted by key: waiting (from its counts) and running (leases not expired). */
async function keysInUse(client: RedisClient, keys: TypeKeys, now: number): Promise<Array<{ key: string; waiting: number; running: number }>> {
  const [, flat] = await client.hscan(keys.keysWaiting, '0', 'COUNT', KEYS_READ);
  const waiting = new Map<string, number>();
  for (let i = 0; i + 1 < flat.length; i += 2) waiting.set(flat[i]!, Number(flat[i + 1]));
  // Keys whose calls run: those of the events in flight sorted by key.
  const [, ids] = await client.hscan(keys.keyedIds, '0', 'COUNT', KEYS_READ);
  for (let i = 1; i < ids.length; i += 2) if (!waiting.has(ids[i]!)) waiting.set(ids[i]!, 0);
  const names = [...waiting.keys()];
  if (names.length === 0) return [];
  // Counted in one transaction (the keys share the queue's slot): read apart, a claim between the reads counted an event as waiting and running.
  const counts = client.multi().hmget(keys.keysWaiting, ...names);
  for (const key of names) counts.zcount(`${keys.keyRunning}${key}`, `(${now}`, '+inf');
  const replies = await counts.exec();
  if (!replies) throw new Error('the per-key counts were not read: the transaction was discarded');
  for (const [error] of replies) if (error) throw error;
  const waitingNow = replies[0]![1] as Array<string | null>;
  const listed = names.map((key, i) => ({ key, waiting: Number(waitingNow[i] ?? 0), running: Number(replies[i + 1]![1]) }));
  return listed
    .filter((k) => k.waiting > 0 || k.running > 0)
    .sort((a, b) => b.waiting - a.waiting || b.running - a.running || (a.key < b.key ? -1 : 1))
    .slice(0, KEYS_SHOWN);
}

function parse(stored: Record<string, string>): StoredLimits {
  const perKey = {
    ...(stored.kmax !== undefined && stored.kper !== undefined ? { rate: { max: Number(stored.kmax), perMs: Number(stored.kper) } } : {}),
    ...(stored.kconc !== undefined ? { concurrency: Number(stored.kconc) } : {}),
  };
  return {
    ...(stored.max !== undefined && stored.per !== undefined ? { rate: { max: Number(stored.max), perMs: Number(stored.per) } } : {}),
    ...(stored.conc !== undefined ? { concurrency: Number(stored.conc) } : {}),
    ...(stored.keyed !== undefined ? { perKey } : {}),
  };
}

/**
 * Stores a queue's limits (or none), as the handler registered last set them:
 * the claims of every instance read them there, so instances never disagree
 * on what is enforced. Resolves what was stored before, when it differs.
 * One transaction, read and write together: one round trip, so nothing is
 * left to send once it has been answered (a close under way never sees a
 * second call go out after it).
 */
export async function storeLimits(client: RedisClient, keys: TypeKeys, limits: StoredLimits): Promise<StoredLimits | undefined> {
  const { flow } = keys;
  const values = fields(limits);
  // Only the limits' fields: the hash also holds a hold, a full mark and the newer-version mark.
  const transaction = client.multi().hgetall(flow).hdel(flow, 'max', 'per', 'conc', 'kmax', 'kper', 'kconc', 'keyed');
  if (Object.keys(values).length > 0) transaction.hset(flow, values);
  const replies = await transaction.exec();
  // As in 0.4: a refused read is retried, a refused write is not (an ACL without +hset leaves the queue unlimited).
  const readError = replies?.[0]?.[0];
  if (readError) throw readError;
  const before = parse((replies?.[0]?.[1] as Record<string, string> | undefined) ?? {});
  return JSON.stringify(before) === JSON.stringify(parse(values)) ? undefined : before;
}

function fields(limits: StoredLimits): Record<string, string> {
  const perKey = limits.perKey;
  return {
    ...(limits.rate ? { max: String(limits.rate.max), per: String(limits.rate.perMs) } : {}),
    ...(limits.concurrency !== undefined ? { conc: String(limits.concurrency) } : {}),
    ...(perKey ? { keyed: '1' } : {}),
    ...(perKey?.rate ? { kmax: String(perKey.rate.max), kper: String(perKey.rate.perMs) } : {}),
    ...(perKey?.concurrency !== undefined ? { kconc: String(perKey.concurrency) } : {}),
  };
}

/**
 * A handler that sorted the queue's events by key stopped here: its claims'
 * stamp goes (lua/includes/limit-keys.lua, kseen), so that instances without
 * the key option take from the ready list at once rather than a minute later.
 * Others that still sort stamp it again with their next claim.
 */
export async function forgetSorter(client: RedisClient, keys: TypeKeys): Promise<void> {
  await client.hdel(keys.flow, 'kseen');
}

/** A queue's limits and what uses them now. */
export async function limitUse(client: RedisClient, keys: TypeKeys): Promise<LimitUse> {
  const [stored, leases, time, keysWaiting] = await Promise.all([client.hgetall(keys.flow), client.zcard(keys.inFlight), client.time(), client.hlen(keys.keysWaiting)]);
  const now = Number(time[0]) * 1_000 + Math.floor(Number(time[1]) / 1_000);
  const limits = parse(stored);
  const started = limits.rate ? await client.zcount(keys.rateWindow, `(${now - limits.rate.perMs}`, '+inf') : undefined;
  const heldForMs = Number(stored.hold ?? 0) - now;
  const pausedForMoveMs = Number(stored.mv ?? 0) - now;
  const perKey = stored.keyed !== undefined || keysWaiting > 0 ? await keysInUse(client, keys, now) : [];
  return {
    ...limits,
    running: leases > 0 ? leases - 1 : 0,
    ...(started !== undefined ? { started } : {}),
    ...(heldForMs > 0 ? { heldForMs } : {}),
    ...(pausedForMoveMs > 0 ? { pausedForMoveMs } : {}),
    ...(keysWaiting > 0 ? { keysWaiting } : {}),
    ...(perKey.length > 0 ? { keys: perKey } : {}),
  };
}

/** Two partitions' limits and use, as the type's: their shares and counts added. */
function addUse(a: LimitUse, b: LimitUse): LimitUse {
  const rate = a.rate && b.rate ? { max: a.rate.max + b.rate.max, perMs: a.rate.perMs } : (a.rate ?? b.rate);
  const perKey = a.perKey ?? b.perKey;
  const concurrency = a.concurrency !== undefined || b.concurrency !== undefined ? (a.concurrency ?? 0) + (b.concurrency ?? 0) : undefined;
  const started = a.started !== undefined || b.started !== undefined ? (a.started ?? 0) + (b.started ?? 0) : undefined;
  const heldForMs = Math.max(a.heldForMs ?? 0, b.heldForMs ?? 0);
  const pausedForMoveMs = Math.max(a.pausedForMoveMs ?? 0, b.pausedForMoveMs ?? 0);
  const keysWaiting = (a.keysWaiting ?? 0) + (b.keysWaiting ?? 0);
  // A key's events are in one partition or spread: its counts added, the busiest kept.
  const byKey = new Map<string, { key: string; waiting: number; running: number }>();
  for (const k of [...(a.keys ?? []), ...(b.keys ?? [])]) {
    const seen = byKey.get(k.key);
    byKey.set(k.key, seen ? { key: k.key, waiting: seen.waiting + k.waiting, running: seen.running + k.running } : k);
  }
  const keys = [...byKey.values()].sort((x, y) => y.waiting - x.waiting || y.running - x.running || (x.key < y.key ? -1 : 1)).slice(0, KEYS_SHOWN);
  return {
    ...(keys.length > 0 ? { keys } : {}),
    ...(keysWaiting > 0 ? { keysWaiting } : {}),
    ...(rate ? { rate } : {}),
    ...(concurrency !== undefined ? { concurrency } : {}),
    ...(perKey ? { perKey } : {}),
    ...(started !== undefined ? { started } : {}),
    running: a.running + b.running,
    ...(heldForMs > 0 ? { heldForMs } : {}),
    ...(pausedForMoveMs > 0 ? { pausedForMoveMs } : {}),
  };
}

/** The flow limits of each group of `queues` (a type's partitions) and their use now, summed over the partitions; groups without limits or use left out. */
export async function limitsOf(client: RedisClient, layout: RedisLayout, queues: readonly TypeKeys[]): Promise<Record<string, LimitUse>> {
  const found: Record<string, LimitUse> = {};
  for (const queue of queues) {
    const groups = [DEFAULT_GROUP, ...(await client.hkeys(queue.groups)).filter((g) => g !== DEFAULT_GROUP)];
    for (const group of groups) {
      const use = await limitUse(client, layout.forGroup(queue, group));
      const seen = found[group];
      found[group] = seen ? addUse(seen, use) : use;
    }
  }
  for (const [group, use] of Object.entries(found)) if (!use.rate && use.concurrency === undefined && !use.perKey && use.heldForMs === undefined) delete found[group];
  return found;
}
