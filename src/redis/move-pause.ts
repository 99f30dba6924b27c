import type { RedisClient } from './redis-client';
import { DEFAULT_GROUP, type RedisLayout, type TypeKeys } from './redis-layout';

/**
 * How long a pause or wait mark lasts unless a sweep renews it: five sweeps
 * of a repartitioner busy with a move (src/runtime/repartitioner.ts), so a
 * slow sweep does not lift it, and a setting whose instances all stopped
 * does not hold the type for long.
 */
export const MOVE_PAUSE_MS = 10_000;

/** A queue of one group, its flow hash, the longest rate window of its limits (0: none), and whether it has per-key rates. */
interface LimitedQueue {
  readonly keys: TypeKeys;
  readonly flow: string;
  readonly windowMs: number;
  readonly perKeyRate: boolean;
}

/**
 * Flow limits across a change of a type's partitions
 * (docs/changing-event-classes.md, "Partitions"). The queues of the setting
 * moved from and those of the setting moved to are different hash slots, so
 * they cannot share one counter on a Cluster. So while a move is in
 * progress, claims from the old queues pause (their flow hash's `mv` mark,
 * lua/includes/limit-room.lua), and the new queues wait until the old ones
 * run no call and their rate windows, counted from the pause, are over. The
 * limits then hold in every window: no call starts in the old queues after
 * the pause, and none in the new ones before the old ones' calls and
 * windows are over. Marks lapse after MOVE_PAUSE_MS unless renewed.
 * Only queues (and groups) with limits are marked.
 */
export class MovePause {
  constructor(
    private readonly client: RedisClient,
    private readonly layout: RedisLayout,
  ) {}

  /** Redis's clock, ms. */
  private async now(): Promise<number> {
    const [seconds, micros] = await this.client.time();
    return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
  }

  /** Every group's queue of `queues` that has limits, with its longest rate window. */
  private async limited(queues: readonly TypeKeys[], signal?: AbortSignal): Promise<LimitedQueue[]> {
    const found: LimitedQueue[] = [];
    for (const queue of queues) {
      if (signal?.aborted) break;
      const groups = [DEFAULT_GROUP, ...(await this.client.hkeys(queue.groups)).filter((g) => g !== DEFAULT_GROUP)];
      for (const group of groups) {
        const keys = this.layout.forGroup(queue, group);
        const flow = keys.flow;
        const [per, conc, keyed, kper] = await this.client.hmget(flow, 'per', 'conc', 'keyed', 'kper');
        if (per === null && conc === null && keyed === null) continue;
        found.push({ keys, flow, windowMs: Math.max(Number(per ?? 0), Number(kper ?? 0)), perKeyRate: kper !== null });
      }
    }
    return found;
  }

  /**
   * Pauses claims from `old` (the queues moved from) for MOVE_PAUSE_MS more.
   * Resolves when, by Redis's clock, the new queues may start: now plus a
   * pause while any old queue has a call running, else once every old
   * queue's rate window since its pause is over (at or before now: at once).
   */
  async pauseOld(old: readonly TypeKeys[]): Promise<number> {
    const queues = await this.limited(old);
    let from = await this.now();
    for (const { keys, flow, windowMs, perKeyRate } of queues) {
      const [mv, mvs] = await this.client.hmget(flow, 'mv', 'mvs');
      const before = await this.now();
      await this.client.hset(flow, 'mv', String(before + MOVE_PAUSE_MS));
      // Read after the mark landed: every call this queue started, it started before this.
      const after = await this.now();
      // A pause still on keeps its start; one that lapsed (or the first) starts now.
      const pausedAt = Number(mv ?? 0) > before && mvs !== null ? Number(mvs) : after;
      if (pausedAt === after) await this.client.hset(flow, 'mvs', String(after));
      // The in-flight set holds a pin beside its leases (redis-layout.ts, LEASE_PIN).
      const running = Math.max(0, (await this.client.zcard(keys.inFlight)) - 1);
      // No call started after the pause: the windows are over a window after the last start before it. The
      // queue's own ledger says when that was; per-key ledgers are many, so with them, counted from the pause.
      const last = perKeyRate ? undefined : (await this.client.zrange(keys.rateWindow, '-1', '-1', 'WITHSCORES'))[1];
      const lastStart = perKeyRate ? pausedAt : Math.min(pausedAt, Number(last ?? Number.NEGATIVE_INFINITY));
      from = Math.max(from, running > 0 ? after + MOVE_PAUSE_MS : lastStart + windowMs);
    }
    return from;
  }

  /**
   * The queues moved to (`mine`) start claiming at `from` (Redis ms): until
   * then they wait. Resolves whether any waits; `from` at or before now lifts the wait.
   */
  async waitUntil(mine: readonly TypeKeys[], from: number, signal?: AbortSignal): Promise<boolean> {
    const queues = await this.limited(mine, signal);
    if (signal?.aborted) return false;
    const now = await this.now();
    for (const { flow } of queues) {
      if (signal?.aborted) return false;
      if (from > now) await this.client.hset(flow, 'mv', String(Math.min(from, now + MOVE_PAUSE_MS)));
      else await this.client.hdel(flow, 'mv');
    }
    return from > now && queues.length > 0;
  }

  /**
   * At a handler's start, before its first claim: when another partitions
   * setting of the type was announced within `recentMs`, its queues may be
   * claiming, so `mine` wait (MOVE_PAUSE_MS at most) until the repartitioner's
   * first sweep says from when they may start. Resolves whether they wait.
   */
  async waitIfMoving(type: string, partitions: number, mine: readonly TypeKeys[], recentMs: number, signal?: AbortSignal): Promise<boolean> {
    // Sent again after an outage (PartitionMoves.bounded): not once the service closes.
    if (signal?.aborted) return false;
    const settings = await this.client.hgetall(this.layout.layoutOf(type));
    // Stopped meanwhile (the service closes): no more calls.
    if (signal?.aborted) return false;
    const now = Date.now();
    // Instances with limits announce their setting (an unpartitioned one too): another one in use lately may be claiming.
    const announced = Object.entries(settings).some(([field, at]) => field !== 'current' && Number(field) !== partitions && now - Number(at) < recentMs);
    if (!announced) return false;
    return this.waitUntil(mine, (await this.now()) + MOVE_PAUSE_MS, signal);
  }
}
