import type { RedisClient } from './redis-client';
import type { TypeKeys } from './redis-layout';

/** A queue's limits as stored (lua/includes/limit-keys.lua): what every instance's claims obey. */
export interface StoredLimits {
  /** At most `max` calls start per `perMs`. */
  readonly rate?: { readonly max: number; readonly perMs: number };
  /** At most this many calls run at once. */
  readonly concurrency?: number;
}

/** What the queue's limits are using now, for inspection. */
export interface LimitUse extends StoredLimits {
  /** Calls started within the last `perMs` (with a rate limit). */
  readonly started?: number;
  /** Calls running (leases held). */
  readonly running: number;
  /** ms left of a hold a handler asked for (rateLimited), if any. */
  readonly heldForMs?: number;
}

/** Where a queue's flow-control keys are: named after its meta key, as the scripts name them. */
function keysOf(keys: TypeKeys): { lim: string; rl: string; hold: string } {
  const own = keys.meta.slice(0, -':m'.length);
  return { lim: `${own}:lim`, rl: `${own}:rl`, hold: `${own}:hold` };
}

function parse(stored: Record<string, string>): StoredLimits {
  const max = Number(stored.max);
  const perMs = Number(stored.per);
  const concurrency = Number(stored.conc);
  return {
    ...(stored.max !== undefined && stored.per !== undefined ? { rate: { max, perMs } } : {}),
    ...(stored.conc !== undefined ? { concurrency } : {}),
  };
}

/**
 * Stores a queue's limits (or none), as the handler registered last set them:
 * the claims of every instance read them there, so instances never disagree
 * on what is enforced. Resolves what was stored before, when it differs.
 */
export async function storeLimits(client: RedisClient, keys: TypeKeys, limits: StoredLimits): Promise<StoredLimits | undefined> {
  const { lim } = keysOf(keys);
  const before = parse(await client.hgetall(lim));
  const same = JSON.stringify(before) === JSON.stringify(parse(fields(limits)));
  if (same) return undefined;
  const pipeline = client.multi().del(lim);
  const values = fields(limits);
  if (Object.keys(values).length > 0) pipeline.hset(lim, values);
  await pipeline.exec();
  return before;
}

function fields(limits: StoredLimits): Record<string, string> {
  return {
    ...(limits.rate ? { max: String(limits.rate.max), per: String(limits.rate.perMs) } : {}),
    ...(limits.concurrency !== undefined ? { conc: String(limits.concurrency) } : {}),
  };
}

/** A queue's limits and what uses them now. */
export async function limitUse(client: RedisClient, keys: TypeKeys): Promise<LimitUse> {
  const { lim, rl, hold } = keysOf(keys);
  const [stored, leases, held] = await Promise.all([client.hgetall(lim), client.zcard(keys.inFlight), client.pttl(hold)]);
  const limits = parse(stored);
  const started = limits.rate ? await client.zcount(rl, String(Date.now() - limits.rate.perMs), '+inf') : undefined;
  return {
    ...limits,
    running: leases > 0 ? leases - 1 : 0,
    ...(started !== undefined ? { started } : {}),
    ...(held > 0 ? { heldForMs: held } : {}),
  };
}
