import { join } from 'node:path';
import { expandLua } from '../../scripts/embed-lua.mjs';
import type { Cluster, Redis } from 'ioredis';

/** lua/includes/schedule-take-due.lua's schedule_take_due, with the clock given: a dispatch at any moment. */
const TAKE_DUE = expandLua(
  join(__dirname, '..', '..', 'lua'),
  `-- @include schedule-take-due
return schedule_take_due(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))`,
);

/**
 * The schedule of one queue as lua/includes/schedule-buckets-constants.lua keeps it: an index
 * `<queue>:b` of bucket -> earliest due, and buckets `<queue>:b:<n>` of id -> due.
 * `queue` is the key base, e.g. `${prefix}:{test.work}`.
 */
export class ScheduleView {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly queue: string,
  ) {}

  /** id -> due ms of every scheduled event. */
  async entries(): Promise<Map<string, number>> {
    const entries = new Map<string, number>();
    for (const bucket of await this.client.zrange(`${this.queue}:b`, '0', '-1')) {
      const flat = await this.client.zrange(`${this.queue}:b:${bucket}`, '0', '-1', 'WITHSCORES');
      for (let i = 0; i < flat.length; i += 2) entries.set(flat[i]!, Number(flat[i + 1]));
    }
    // The side schedule: 0.1's, and since 0.6 trailing payloads a leading debounce released (lua/includes/burst-release.lua).
    const side = await this.client.zrange(`${this.queue}:s`, '0', '-1', 'WITHSCORES');
    for (let i = 0; i < side.length; i += 2) entries.set(side[i]!, Number(side[i + 1]));
    return entries;
  }

  async dueOf(id: string): Promise<number | undefined> {
    return (await this.entries()).get(id);
  }

  /**
   * What lua/includes/schedule-buckets-constants.lua promises of its buckets, as a list of
   * violations (empty when all hold): each id is in one bucket, each bucket is
   * listpack-encoded and indexed by its earliest due, and holds nothing later
   * than the next greater earliest due in the index; of buckets sharing an
   * earliest due, only the last by name holds anything later than that.
   */
  async violations(): Promise<string[]> {
    const found: string[] = [];
    const index = await this.client.zrange(`${this.queue}:b`, '0', '-1', 'WITHSCORES');
    const ranges: Array<{ bucket: string; lo: number; hi: number }> = [];
    const bucketOf = new Map<string, string>();
    for (let i = 0; i < index.length; i += 2) {
      const bucket = index[i]!;
      const key = `${this.queue}:b:${bucket}`;
      const flat = await this.client.zrange(key, '0', '-1', 'WITHSCORES');
      if (flat.length === 0) {
        found.push(`bucket ${bucket} is indexed but empty`);
        continue;
      }
      for (let j = 0; j < flat.length; j += 2) {
        const other = bucketOf.get(flat[j]!);
        if (other !== undefined) found.push(`${flat[j]} is in buckets ${other} and ${bucket}`);
        bucketOf.set(flat[j]!, bucket);
      }
      const encoding = await this.client.object('ENCODING', key);
      if (encoding !== 'listpack') found.push(`bucket ${bucket} is ${encoding} with ${flat.length / 2} entries`);
      const lo = Number(flat[1]);
      if (Number(index[i + 1]) !== lo) found.push(`bucket ${bucket} is indexed at ${index[i + 1]} but starts at ${lo}`);
      ranges.push({ bucket, lo, hi: Number(flat[flat.length - 1]) });
    }
    for (const id of await this.client.zrange(`${this.queue}:s`, '0', '-1')) if (bucketOf.has(id)) found.push(`${id} is in bucket ${bucketOf.get(id)} and the side schedule`);
    // The index orders buckets sharing a score by name, bytewise: ASCII names compare alike here.
    const lastOfGroup = new Map<number, string>();
    for (const { bucket, lo } of ranges) if ((lastOfGroup.get(lo) ?? '') < bucket) lastOfGroup.set(lo, bucket);
    for (const { bucket, lo, hi } of ranges) {
      if (hi > lo && lastOfGroup.get(lo) !== bucket) found.push(`bucket ${bucket} [${lo}, ${hi}] holds later entries than its start but is not the last of the buckets starting there`);
    }
    const starts = [...new Set(ranges.map((r) => r.lo))].sort((a, b) => a - b);
    for (const { bucket, lo, hi } of ranges) {
      const next = starts.find((start) => start > lo);
      if (next !== undefined && hi > next) found.push(`bucket ${bucket} [${lo}, ${hi}] reaches past the next start ${next}`);
    }
    return found;
  }

  /** Takes up to `limit` events due at `now` out of the schedule, as dispatch-due.lua does; their ids. */
  async takeDue(now: number, limit: number): Promise<string[]> {
    return (await this.client.eval(TAKE_DUE, 1, `${this.queue}:b`, now, limit)) as string[];
  }

  /** Takes an event out of the schedule by hand, as a dispatcher would before moving it elsewhere. */
  async remove(id: string): Promise<void> {
    for (const bucket of await this.client.zrange(`${this.queue}:b`, '0', '-1')) {
      const key = `${this.queue}:b:${bucket}`;
      if ((await this.client.zrem(key, id)) === 0) continue;
      const head = await this.client.zrange(key, '0', '0', 'WITHSCORES');
      if (head.length > 0) await this.client.zadd(`${this.queue}:b`, head[1]!, bucket);
      else await this.client.zrem(`${this.queue}:b`, bucket);
      return;
    }
    throw new Error(`${id} is not scheduled in ${this.queue}`);
  }
}
