import { parseEnvelope } from '../core/envelope';
import type { RedisClient } from './redis-client';
import type { TypeKeys } from './redis-layout';

/**
 * One step of a walk over every event stored in a queue (HSCAN of its
 * bodies; a named group's: of the ids it holds), for verifyStored,
 * upgradeStored and versions: id and body pairs, and the cursor to go on
 * from ('0' when done). An event may be seen twice; none stored throughout
 * is missed.
 */
export async function scanBodies(client: RedisClient, keys: TypeKeys, cursor: string, count: number): Promise<{ cursor: string; events: Array<{ id: string; body: string }> }> {
  const [next, flat] = await client.hscan(keys.meta, cursor, 'COUNT', count);
  const events: Array<{ id: string; body: string }> = [];
  if (keys.meta === keys.sharedMeta) {
    for (let i = 0; i < flat.length; i += 2) events.push({ id: flat[i]!, body: parseEnvelope(flat[i + 1]!).body });
  } else if (flat.length > 0) {
    const ids = flat.filter((_, i) => i % 2 === 0);
    const bodies = await client.hmget(keys.sharedMeta, ...ids);
    ids.forEach((id, i) => {
      const value = bodies[i];
      if (value != null) events.push({ id, body: parseEnvelope(value).body });
    });
  }
  return { cursor: next, events };
}
