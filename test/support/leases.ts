import type { Cluster, Redis } from 'ioredis';
import { LEASE_PIN } from '../../src/redis/redis-layout';

/** An in-flight score as lua/includes/lease.lua writes it: lease expiry and the attempt it fences. */
export function leaseScore(expiresAtMs: number, attempt: number): number {
  return expiresAtMs * 1_000 + (attempt % 1_000);
}

/** The ids holding a lease in an in-flight set: every member but the pin (src/redis-layout.ts). */
export async function leasedIds(client: Redis | Cluster, inFlightKey: string): Promise<string[]> {
  const members = await client.zrangeBuffer(inFlightKey, '0', '-1');
  return members.filter((member) => !member.equals(LEASE_PIN)).map((member) => member.toString());
}
