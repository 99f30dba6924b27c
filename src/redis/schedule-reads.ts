import type { RedisClient } from './redis-client';
import { bucketKey, type TypeKeys } from './redis-layout';

// Reading a type's schedule (state SCHEDULED): buckets of a sorted set each,
// indexed by their earliest due (lua/includes/schedule-buckets-constants.lua
// says how they are kept), and 0.1's single sorted set while it is emptied.

/** Bucket names read per call while walking a schedule. */
const BUCKET_WALK = 256;

/** An id in a state, with what it sorts by across partitions. */
export interface Entry {
  readonly id: string;
  /** Sort key across partitions: due, lease expiry, dead-lettered at, or position. */
  readonly key: number;
  /** The score read with it (lease or dead-lettered at), if any. */
  readonly score?: number;
}

function pipelineValues(replies: Array<[Error | null, unknown]> | null): unknown[] {
  return (replies ?? []).map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}

/**
 * Whether `id` is in the schedule: in a bucket starting at its due time, or
 * at the greatest earliest due below it (lua/includes/schedule-buckets-constants.lua), or in 0.1's zset.
 */
export async function isScheduled(client: RedisClient, keys: TypeKeys, id: string, due: number): Promise<boolean> {
  if ((await client.zscore(keys.legacySchedule, id)) !== null) return true;
  const at = await client.zrange(keys.schedule, String(due), String(due), 'BYSCORE');
  const below = await client.zrange(keys.schedule, `(${due}`, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES');
  const buckets = [...at];
  if (below[1] !== undefined) buckets.push(...(await client.zrange(keys.schedule, below[1], below[1], 'BYSCORE')));
  if (due === 0) buckets.push(...(await client.zrange(keys.schedule, '0', '-1')));
  for (const bucket of buckets) if ((await client.zscore(bucketKey(keys, bucket), id)) !== null) return true;
  return false;
}

/**
 * Walks the schedule's buckets in index order, each sorted by due: buckets
 * hold disjoint ranges of due times (lua/includes/schedule-buckets-constants.lua), so this is
 * due order. Whole buckets before `from` are skipped by their size alone.
 */
export async function scheduledEntries(client: RedisClient, keys: TypeKeys, from: number, count: number): Promise<Entry[]> {
  const legacy = await client.zcard(keys.legacySchedule);
  if (legacy > 0) {
    // 0.1's zset, still being emptied: merge it with the buckets' first from + count.
    const [buckets, flat] = await Promise.all([bucketEntries(client, keys, 0, from + count), client.zrange(keys.legacySchedule, '0', String(from + count - 1), 'WITHSCORES')]);
    const old: Entry[] = [];
    for (let i = 0; i < flat.length; i += 2) old.push({ id: flat[i]!, key: Number(flat[i + 1]) });
    return [...buckets, ...old].sort((a, b) => a.key - b.key).slice(from, from + count);
  }
  return bucketEntries(client, keys, from, count);
}

async function bucketEntries(client: RedisClient, keys: TypeKeys, from: number, count: number): Promise<Entry[]> {
  const entries: Entry[] = [];
  let skip = from;
  // A bucket holds 48 to 64 events once full: read about as many names as the page needs, more while skipping.
  let chunk = Math.min(BUCKET_WALK, Math.ceil((from + count) / 32) + 2);
  for (let start = 0; entries.length < count; start += chunk, chunk = Math.min(BUCKET_WALK, chunk * 2)) {
    const names = await client.zrange(keys.schedule, String(start), String(start + chunk - 1));
    if (names.length === 0) break;
    const sizing = client.pipeline();
    for (const name of names) sizing.zcard(bucketKey(keys, name));
    const sizes = pipelineValues(await sizing.exec()) as number[];
    const ranges: Array<{ name: string; from: number; to: number }> = [];
    let wanted = count - entries.length;
    for (let i = 0; i < names.length && wanted > 0; i++) {
      const size = sizes[i]!;
      if (skip >= size) {
        skip -= size;
        continue;
      }
      const take = Math.min(size - skip, wanted);
      ranges.push({ name: names[i]!, from: skip, to: skip + take - 1 });
      wanted -= take;
      skip = 0;
    }
    if (ranges.length === 0) continue;
    const reading = client.pipeline();
    for (const r of ranges) reading.zrange(bucketKey(keys, r.name), String(r.from), String(r.to), 'WITHSCORES');
    for (const flat of pipelineValues(await reading.exec()) as string[][]) {
      for (let i = 0; i < flat.length; i += 2) entries.push({ id: flat[i]!, key: Number(flat[i + 1]) });
    }
  }
  return entries.slice(0, count);
}
