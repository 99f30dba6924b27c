import { Cluster } from 'ioredis';
import type { RedisClient } from './lua-scripts';

/**
 * Whether Redis may evict keys without a TTL, such as every key of this
 * service, under `policy`: only the allkeys-* policies do (volatile-* evict
 * keys with a TTL, noeviction none). An evicted envelope hash or schedule
 * bucket loses its events without a trace.
 */
export function evictsKeysWithoutTtl(policy: string): boolean {
  return policy.startsWith('allkeys-');
}

/** The maxmemory-policy of each master, from INFO (managed Redis often refuses CONFIG GET). */
export async function maxmemoryPolicies(client: RedisClient): Promise<string[]> {
  const masters = client instanceof Cluster ? client.nodes('master') : [client];
  const infos = await Promise.all(masters.map((master) => master.info('memory')));
  return infos.map((info) => /^maxmemory_policy:(\S+)/m.exec(info)?.[1] ?? 'unknown');
}
