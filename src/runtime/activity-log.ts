import type { RedisClient } from '../redis/redis-client';
import type { RedisLayout } from '../redis/redis-layout';
import type { BackgroundService } from './background-service';
import { HANDLED_OUTCOMES, type HandledOutcome } from './outcomes';

/**
 * What the fleet did per type, over time: every instance adds its own counts
 * into one small hash per type per 10-second slot, so a dashboard started
 * anywhere (even one that handles nothing) charts the whole fleet. Counts go
 * out in one pipeline per type per flush, never on the event path, which only
 * adds to counters in memory.
 */

/** Width of one slot. */
export const ACTIVITY_SLOT_MS = 10_000;
/** How long a slot's hash is kept: the dashboard charts up to the last hour. */
export const ACTIVITY_RETENTION_MS = 3_600_000;
/** Longest close() waits to write the last counts: a silent Redis must not hold a shutdown. */
const CLOSE_FLUSH_MS = 1_000;
/** Slots an instance keeps while Redis is unreachable, per type, before dropping the oldest. */
const UNSENT_SLOTS_KEPT = ACTIVITY_RETENTION_MS / ACTIVITY_SLOT_MS;

/**
 * Lateness goes into quarter-octave buckets: field `l<k>` counts latenesses
 * up to 2^(k/4) ms (k = 0: under 1 ms), so a percentile read back is within
 * 19% of the true one, and a slot holds a few dozen fields at most.
 */
function latenessBucket(ms: number): number {
  return ms < 1 ? 0 : Math.max(1, Math.ceil(Math.log2(ms) * 4));
}

function bucketUpperMs(k: number): number {
  return k === 0 ? 1 : Math.round(2 ** (k / 4) * 10) / 10;
}

/** One slot of one type, as activity() returns it. */
export interface ActivitySlot {
  /** Start of the 10-second slot. */
  readonly at: Date;
  /** Events stored by enqueues (recurring occurrences included). */
  readonly enqueued: number;
  /** Handler calls that succeeded, in every group (outcome `success`). */
  readonly handled: number;
  /** Handler calls that failed (each retry counts once; outcome `failure`). */
  readonly failed: number;
  /** Handler calls that snoozed their event (outcome `snoozed`; since 0.6). */
  readonly snoozed: number;
  /** Handler calls that said their provider rate-limited them (outcome `rate-limited`; since 0.6). */
  readonly rateLimited: number;
  /** Handler calls whose result was fenced off: the event was cancelled, replaced or redelivered meanwhile (outcome `stale`; since 0.6). */
  readonly stale: number;
  /** Events dead-lettered, for any reason. */
  readonly deadLettered: number;
  /** Lateness of the events claimed in this slot (due time to claim): median and 99th percentile, ms, to within 19%; undefined when none were. */
  readonly latenessP50Ms: number | undefined;
  readonly latenessP99Ms: number | undefined;
}

/** What one instance counted of one type in one slot. */
interface SlotCounts {
  enqueued: number;
  handled: number;
  failed: number;
  snoozed: number;
  rateLimited: number;
  stale: number;
  deadLettered: number;
  /** Claims per lateness bucket (see latenessBucket). */
  readonly lateness: number[];
}

const emptyCounts = (): SlotCounts => ({ enqueued: 0, handled: 0, failed: 0, snoozed: 0, rateLimited: 0, stale: 0, deadLettered: 0, lateness: [] });

/** The slot hash's field of each outcome (docs/redis-layout.md, "Activity"). */
const OUTCOME_FIELDS = { success: 'ok', failure: 'fail', snoozed: 'snz', 'rate-limited': 'rl', stale: 'stale' } as const;
const OUTCOME_COUNTS = { success: 'handled', failure: 'failed', snoozed: 'snoozed', 'rate-limited': 'rateLimited', stale: 'stale' } as const;

/**
 * One type's counts in this instance: plain increments on the event path
 * (a clock read and a few additions per event, no allocation), handed to the
 * recorder slot by slot.
 */
export class TypeActivity {
  private slot = -1;
  private counts = emptyCounts();
  /** Slots that ended and were not written yet, oldest first. */
  readonly ended: Array<{ slot: number; counts: SlotCounts }> = [];

  private current(): SlotCounts {
    const now = Date.now();
    const slot = now - (now % ACTIVITY_SLOT_MS);
    if (slot !== this.slot) {
      this.end();
      this.slot = slot;
    }
    return this.counts;
  }

  private end(): void {
    const c = this.counts;
    if (c.enqueued + c.handled + c.failed + c.snoozed + c.rateLimited + c.stale + c.deadLettered + c.lateness.length === 0) return;
    this.ended.push({ slot: this.slot, counts: c });
    if (this.ended.length > UNSENT_SLOTS_KEPT) this.ended.shift();
    this.counts = emptyCounts();
  }

  enqueued(count: number): void {
    this.current().enqueued += count;
  }

  /** A handler call ended and its result was written; `latenessMs` is from the event's due time to its claim. */
  handled(outcome: HandledOutcome, latenessMs: number): void {
    const c = this.current();
    c[OUTCOME_COUNTS[outcome]]++;
    const k = latenessBucket(latenessMs);
    c.lateness[k] = (c.lateness[k] ?? 0) + 1;
  }

  deadLettered(count: number): void {
    this.current().deadLettered += count;
  }

  /** Every slot counted so far, the running one included, leaving none. */
  take(): Array<{ slot: number; counts: SlotCounts }> {
    this.end();
    return this.ended.splice(0);
  }

  /** Puts back slots a flush could not write. */
  giveBack(slots: ReadonlyArray<{ slot: number; counts: SlotCounts }>): void {
    this.ended.unshift(...slots);
    if (this.ended.length > UNSENT_SLOTS_KEPT) this.ended.splice(0, this.ended.length - UNSENT_SLOTS_KEPT);
  }
}

/** Adds this instance's counts into the type's slot hashes (see the top of this file), every slot and on close. */
export class ActivityRecorder implements BackgroundService {
  private readonly types = new Map<string, TypeActivity>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly client: RedisClient,
    private readonly layout: RedisLayout,
    /** Longest one write may take (the service's commandTimeoutMs): then it counts as failed. */
    private readonly timeoutMs: number,
    /** Told when Redis refuses the writes (an ACL without +hincrby or +pexpire): the charts stay empty. */
    private readonly onRefused: (error: Error) => void = () => undefined,
  ) {}

  /** Writes every ACTIVITY_SLOT_MS from now on. */
  start(): void {
    if (this.timer || this.stopping) return;
    this.timer = setInterval(() => {
      if (!this.stopping) void this.flush();
    }, ACTIVITY_SLOT_MS);
    this.timer.unref();
  }

  /** The counters of `type`, made on first use. */
  of(type: string): TypeActivity {
    let activity = this.types.get(type);
    if (!activity) this.types.set(type, (activity = new TypeActivity()));
    return activity;
  }

  /** Writes what was counted; what fails to reach Redis is kept (bounded) for the next flush. */
  flush(timeoutMs = this.timeoutMs): Promise<void> {
    this.flushing ??= this.write(timeoutMs).finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async write(timeoutMs: number): Promise<void> {
    // Not while the connection is down: on a client handed in, ioredis would queue the writes and send them on
    // reconnect, after close() may have resolved. They wait here for the next flush instead.
    if (this.client.status !== 'ready') return;
    await Promise.all(
      [...this.types].map(async ([type, activity]) => {
        const slots = activity.take();
        if (slots.length === 0) return;
        // One pipeline per type: its slot keys share the type's hash tag, so a Cluster takes it whole.
        const pipeline = this.client.pipeline();
        for (const { slot, counts } of slots) {
          const key = this.layout.activityKey(type, slot);
          if (counts.enqueued > 0) pipeline.hincrby(key, 'enq', counts.enqueued);
          for (const outcome of HANDLED_OUTCOMES) {
            const n = counts[OUTCOME_COUNTS[outcome]];
            if (n > 0) pipeline.hincrby(key, OUTCOME_FIELDS[outcome], n);
          }
          if (counts.deadLettered > 0) pipeline.hincrby(key, 'dead', counts.deadLettered);
          counts.lateness.forEach((n, k) => n > 0 && pipeline.hincrby(key, `l${k}`, n));
          pipeline.pexpire(key, ACTIVITY_RETENTION_MS + ACTIVITY_SLOT_MS);
        }
        let timer: NodeJS.Timeout | undefined;
        try {
          const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('activity not written in time')), timeoutMs)));
          const replies = (await Promise.race([pipeline.exec(), late])) ?? [];
          const refused = replies.find(([error]) => error instanceof Error && /^NOPERM\b/.test(error.message));
          if (refused) this.onRefused(refused[0] as Error);
          if (replies.some(([error]) => error)) throw new Error('activity not written');
        } catch {
          // Written again next time; an increment that did land is then counted twice, which a chart can bear.
          activity.giveBack(slots);
        } finally {
          clearTimeout(timer);
        }
      }),
    );
  }

  /**
   * Stops the timer and writes what is left, if Redis takes it within a
   * second (and commandTimeoutMs). A periodic write under way is waited for
   * first, within the same bound: should it outlast the bound, what is left
   * is not written at all, rather than sent after stop() resolved.
   */
  stop(): Promise<void> {
    this.stopping ??= this.writeLast();
    return this.stopping;
  }

  private async writeLast(): Promise<void> {
    clearInterval(this.timer);
    const bound = Math.min(this.timeoutMs, CLOSE_FLUSH_MS);
    let timer: NodeJS.Timeout | undefined;
    let late = false;
    const written = (async () => {
      await this.flushing;
      if (!late) await this.flush(bound);
    })();
    await Promise.race([written, new Promise<void>((resolve) => (timer = setTimeout(resolve, bound)))]);
    late = true;
    clearTimeout(timer);
  }
}

/** The type's slots from `sinceMs` to now, oldest first; slots with nothing recorded come back as zeros. */
export async function readActivity(client: RedisClient, layout: RedisLayout, type: string, sinceMs: number, nowMs: number): Promise<ActivitySlot[]> {
  const first = sinceMs - (sinceMs % ACTIVITY_SLOT_MS);
  const slots: number[] = [];
  for (let slot = first; slot <= nowMs; slot += ACTIVITY_SLOT_MS) slots.push(slot);
  const pipeline = client.pipeline();
  for (const slot of slots) pipeline.hgetall(layout.activityKey(type, slot));
  const replies = (await pipeline.exec()) ?? [];
  return slots.map((slot, i) => {
    const [error, value] = replies[i] ?? [null, {}];
    if (error) throw error;
    return slotOf(slot, (value ?? {}) as Record<string, string>);
  });
}

function slotOf(slot: number, fields: Record<string, string>): ActivitySlot {
  const count = (field: string) => Number(fields[field] ?? 0);
  const lateness: Array<[number, number]> = [];
  for (const [field, value] of Object.entries(fields)) if (field.startsWith('l')) lateness.push([Number(field.slice(1)), Number(value)]);
  lateness.sort((a, b) => a[0] - b[0]);
  const total = lateness.reduce((n, [, c]) => n + c, 0);
  const percentile = (p: number): number | undefined => {
    if (total === 0) return undefined;
    const rank = Math.ceil(total * p);
    let seen = 0;
    for (const [k, c] of lateness) if ((seen += c) >= rank) return bucketUpperMs(k);
    return undefined;
  };
  return {
    at: new Date(slot),
    enqueued: count('enq'),
    handled: count(OUTCOME_FIELDS.success),
    failed: count(OUTCOME_FIELDS.failure),
    snoozed: count(OUTCOME_FIELDS.snoozed),
    rateLimited: count(OUTCOME_FIELDS['rate-limited']),
    stale: count(OUTCOME_FIELDS.stale),
    deadLettered: count('dead'),
    latenessP50Ms: percentile(0.5),
    latenessP99Ms: percentile(0.99),
  };
}
