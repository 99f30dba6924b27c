import type { Cluster, Redis } from 'ioredis';
import { LEASE_PIN } from '../../src/redis/redis-layout';

/**
 * An in-flight score as lua/includes/lease-constants.lua writes it: lease expiry, the
 * claim's microsecond (even), and 1 when the handler started.
 */
export function leaseScore(expiresAtMs: number, started = true, microsecond = 0): number {
  return expiresAtMs * 1_000 + (microsecond - (microsecond % 2)) + (started ? 1 : 0);
}

/** The ids holding a lease in an in-flight set: every member but the pin (src/redis-layout.ts). */
export async function leasedIds(client: Redis | Cluster, inFlightKey: string): Promise<string[]> {
  const members = await client.zrangeBuffer(inFlightKey, '0', '-1');
  return members.filter((member) => !member.equals(LEASE_PIN)).map((member) => member.toString());
}
