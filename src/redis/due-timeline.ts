import type { RedisClient } from './redis-client';
import { bucketKey, type TypeKeys } from './redis-layout';

/** How many scheduled events fall due in one stretch of time. */
export interface DueSlot {
  readonly from: Date;
  readonly to: Date;
  readonly count: number;
}

/** What falls due from now to the horizon, in equal slots. */
export interface DueTimeline {
  /** Scheduled and already due, not yet moved to ready (a dispatcher is behind, or the type is paused). */
  readonly overdue: number;
  readonly slots: readonly DueSlot[];
  /** True when the horizon holds more buckets than one call reads: the last slots then count too few. */
  readonly partial: boolean;
}

/** Schedule buckets (48-64 events each) one call reads per queue: about a million events. */
const MAX_BUCKETS = 20_000;

/**
 * Counts from the schedule's index and bucket sizes alone, never reading
 * events: buckets hold disjoint ranges of due times (lua/includes/schedule-buckets-constants.lua),
 * so the events due before a time t are the buckets starting before t, less
 * those of the last such bucket due at t or later. One ZCARD per bucket in
 * the horizon and one ZCOUNT per slot boundary, in one pipeline per queue.
 */
export async function readDueTimeline(client: RedisClient, queues: readonly TypeKeys[], nowMs: number, horizonMs: number, slotCount: number): Promise<DueTimeline> {
  const width = horizonMs / slotCount;
  const boundaries = Array.from({ length: slotCount + 1 }, (_, i) => Math.round(nowMs + i * width));
  const before = new Array<number>(boundaries.length).fill(0); // events due before each boundary
  let partial = false;
  for (const keys of queues) {
    const flat = await client.zrange(keys.schedule, '-inf', `(${boundaries[slotCount]}`, 'BYSCORE', 'LIMIT', 0, MAX_BUCKETS, 'WITHSCORES');
    const buckets: Array<{ name: string; lo: number }> = [];
    for (let i = 0; i < flat.length; i += 2) buckets.push({ name: flat[i]!, lo: Number(flat[i + 1]) });
    if (buckets.length === MAX_BUCKETS) partial = true;
    const pipeline = client.pipeline();
    for (const bucket of buckets) pipeline.zcard(bucketKey(keys, bucket.name));
    // The last bucket starting before each boundary may run past it.
    const straddlers = boundaries.map((b) => {
      let last = -1;
      for (let i = 0; i < buckets.length && buckets[i]!.lo < b; i++) last = i;
      return last;
    });
    boundaries.forEach((b, i) => {
      if (straddlers[i]! >= 0) pipeline.zcount(bucketKey(keys, buckets[straddlers[i]!]!.name), String(b), '+inf');
    });
    for (const b of boundaries) pipeline.zcount(keys.legacySchedule, '-inf', `(${b}`);
    const replies = ((await pipeline.exec()) ?? []).map(([error, value]) => {
      if (error) throw error;
      return Number(value);
    });
    const sizes = replies.slice(0, buckets.length);
    let r = buckets.length;
    boundaries.forEach((b, i) => {
      let count = 0;
      for (let k = 0; k < buckets.length && buckets[k]!.lo < b; k++) count += sizes[k]!;
      if (straddlers[i]! >= 0) count -= replies[r++]!;
      before[i]! += count;
    });
    boundaries.forEach((_, i) => (before[i]! += replies[r++]!));
  }
  return {
    overdue: before[0]!,
    slots: boundaries.slice(0, -1).map((from, i) => ({ from: new Date(from), to: new Date(boundaries[i + 1]!), count: Math.max(0, before[i + 1]! - before[i]!) })),
    partial,
  };
}
