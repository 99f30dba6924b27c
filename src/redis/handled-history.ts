import type { RedisClient } from './redis-client';
import { DEFAULT_GROUP, type RedisLayout, type TypeKeys } from './redis-layout';
import { parseHandled } from './stored-records';
import type { EventState, StoredEvent } from './stored-types';

/**
 * The history of what ran (keepHandled), read: one event's record, or a page
 * newest first. Records older than `ageMs` (the services' keepHandled.ageMs,
 * when known; 0: no age limit) are not read, though the dispatchers' next
 * look (lua/dispatch-due.lua) may not have dropped them yet.
 */
export class HandledHistory {
  constructor(
    private readonly client: RedisClient,
    private readonly layout: RedisLayout,
    private readonly ageMs: number,
  ) {}

  /** The oldest handled-at time read; -Infinity without an age limit. */
  private cutoff(): number {
    return this.ageMs > 0 ? Date.now() - this.ageMs : Number.NEGATIVE_INFINITY;
  }

  /** An event no longer stored: its record in the history of the queue, or of the named groups that handled it. */
  async find(keys: TypeKeys, id: string, handled: string | null, registry: readonly string[], named: readonly string[]): Promise<StoredEvent | undefined> {
    const cutoff = this.cutoff();
    const fresh = (record: string | null) => {
      const parsed = record === null ? undefined : parseHandled(id, record);
      return parsed && (parsed.handledAt ?? 0) >= cutoff ? parsed : undefined;
    };
    let found = fresh(handled);
    const groups: Record<string, EventState> = {};
    if (found && registry.includes(DEFAULT_GROUP)) groups[DEFAULT_GROUP] = 'handled';
    for (const group of named) {
      const kept = fresh(await this.client.hget(this.layout.forGroup(keys, group).handled, id));
      if (!kept) continue;
      groups[group] = 'handled';
      found ??= kept;
    }
    if (!found) return undefined;
    return { ...found, ...(Object.keys(groups).length > 0 ? { groups } : {}) };
  }

  /** One page of the history, newest first; across partitions, each one's first offset + limit merged. */
  async page(queues: readonly TypeKeys[], offset: number, limit: number): Promise<StoredEvent[]> {
    const single = queues.length === 1;
    const cutoff = this.cutoff();
    const perQueue = await Promise.all(
      queues.map(async (keys) => {
        // ZRANGE ... BYSCORE REV, not ZREVRANGEBYSCORE: the ACL the README documents grants ZRANGE.
        const from = single ? offset : 0;
        const count = single ? limit : offset + limit;
        const oldest = Number.isFinite(cutoff) ? String(Math.ceil(cutoff)) : '-inf';
        const flat = await this.client.zrange(keys.handledIndex, '+inf', oldest, 'BYSCORE', 'REV', 'LIMIT', from, count, 'WITHSCORES');
        const entries: Array<{ id: string; at: number; keys: TypeKeys }> = [];
        for (let i = 0; i < flat.length; i += 2) entries.push({ id: flat[i]!, at: Number(flat[i + 1]), keys });
        return entries;
      }),
    );
    const page = single
      ? perQueue[0]!
      : perQueue
          .flat()
          .sort((a, b) => b.at - a.at)
          .slice(offset, offset + limit);
    const byQueue = new Map<TypeKeys, string[]>();
    for (const { id, keys } of page) byQueue.set(keys, [...(byQueue.get(keys) ?? []), id]);
    const records = new Map<string, string | null>();
    await Promise.all(
      [...byQueue].map(async ([keys, ids]) => {
        const values = await this.client.hmget(keys.handled, ...ids);
        ids.forEach((id, i) => records.set(`${keys.tag}\n${id}`, values[i] ?? null));
      }),
    );
    const events: StoredEvent[] = [];
    for (const { id, keys } of page) {
      const record = records.get(`${keys.tag}\n${id}`);
      const parsed = record ? parseHandled(id, record) : undefined;
      if (parsed) events.push(parsed);
    }
    return events;
  }
}
