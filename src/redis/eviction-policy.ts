import type { Cluster } from 'ioredis';
import type { RedisClient } from './redis-client';

/** What decides whether a master may evict keys: its memory limit and its policy. */
export interface EvictionSettings {
  /** Bytes; 0 means no limit, so nothing is ever evicted. */
  readonly maxmemory: number;
  readonly policy: string;
}

/**
 * Whether a master may evict keys without a TTL, such as every key of this
 * service: only with a memory limit and an allkeys-* policy (volatile-*
 * policies evict keys with a TTL, noeviction none). An evicted envelope hash
 * or schedule bucket loses its events without a trace.
 */
export function evictsKeysWithoutTtl(settings: EvictionSettings): boolean {
  return settings.maxmemory > 0 && settings.policy.startsWith('allkeys-');
}

/** Each master's settings, from INFO (managed Redis often refuses CONFIG GET). */
export async function evictionSettings(client: RedisClient): Promise<EvictionSettings[]> {
  const masters = client.isCluster ? (client as Cluster).nodes('master') : [client];
  const infos = await Promise.all(masters.map((master) => master.info('memory')));
  return infos.map((info) => ({
    maxmemory: Number(/^maxmemory:(\d+)/m.exec(info)?.[1] ?? 0),
    policy: /^maxmemory_policy:(\S+)/m.exec(info)?.[1] ?? 'unknown',
  }));
}
