import { randomBytes } from 'node:crypto';
import type { EventRoute } from '../core/delayed-event.decorator';
import type { LuaScripts } from './lua-scripts';
import type { RedisClient } from './redis-client';
import type { RedisLayout, TypeKeys } from './redis-layout';
import { MAX_PARTITIONS } from './stored-types';
import { FlowStore } from './flow-store';
import { MovePause } from './move-pause';

/** The field of the layout hash naming the setting events move to. */
const CURRENT = 'current';
/**
 * How old a moving record must be before a sweep sends it on itself: younger,
 * it is most likely another instance's move under way (whose token fences a
 * resend anyway).
 */
const MOVE_GRACE_MS = 30_000;
/** Ids taken out per migrate-out call. */
const MOVE_STEP = 200;

/**
 * Moving a type's stored events when its `partitions` setting changes: the
 * reads and the calls of lua/migrate-out.lua and lua/migrate-in.lua, which
 * alone know how an event is kept whole on the way. Each event goes through
 * three steps, each one call in one slot: out of its old queue into that
 * queue's moving hash (no reader there can claim it then), into its new
 * queue under the move's token (stored once, however often sent), then out of
 * the moving hash. A crash between steps leaves it in the moving hash, and the
 * next sweep of that queue sends it on (finishMoves): nothing is lost, nothing
 * is stored twice.
 */
export class PartitionMoves {
  private readonly movePause: MovePause;

  private readonly flows: FlowStore;
  constructor(
    private readonly client: RedisClient,
    private readonly layout: RedisLayout,
    private readonly scripts: LuaScripts,
  ) {
    this.movePause = new MovePause(client, layout);
    this.flows = new FlowStore(client, layout, scripts, layout.wakeChannel);
  }

  /** Pauses claims from the queues moved from (src/redis/move-pause.ts); resolves from when the new queues may start. */
  pauseOld(old: readonly TypeKeys[]): Promise<number> {
    return this.bounded(() => this.movePause.pauseOld(old));
  }

  /** The queues moved to start claiming at `from` (Redis ms), not before; resolves whether they wait. */
  waitUntil(mine: readonly TypeKeys[], from: number): Promise<boolean> {
    return this.bounded(() => this.movePause.waitUntil(mine, from));
  }

  /** Before a handler with limits first claims: its queues wait while another setting may be claiming. */
  waitIfMoving(type: string, partitions: number, mine: readonly TypeKeys[], recentMs: number, signal?: AbortSignal): Promise<boolean> {
    return this.bounded(() => this.movePause.waitIfMoving(type, partitions, mine, recentMs, signal));
  }

  /**
   * Every command under commandTimeoutMs: a call whose connection dropped is
   * never answered (the connections do not send it again), and the sweep
   * waiting for it, and close() waiting for the sweep, would wait forever.
   */
  private bounded<R>(work: () => Promise<R>): Promise<R> {
    return this.scripts.bounded('partition-moves', work);
  }

  /**
   * Says that an instance with `partitions` handles or stores the type now. A
   * type that was never partitioned keeps no layout hash: an unpartitioned
   * instance says so only once another setting has been in use.
   */
  async announce(type: string, partitions: number, always = false): Promise<void> {
    await this.bounded(() => this.say(type, partitions, always));
  }

  /**
   * announce() for the enqueue path: sent and forgotten, off the calls'
   * deadlines (nothing waits for it; a lost reply costs only this word, said
   * again a minute later), so it never counts as a stuck call of the caller's.
   */
  announceInPassing(type: string, partitions: number, signal?: AbortSignal): Promise<void> {
    // Through the ready gate, unbounded: on a client handed in, a call queued offline would be sent after close().
    const waiting = this.scripts.gate.wait() ?? Promise.resolve();
    return waiting.then(() => (signal?.aborted ? undefined : this.say(type, partitions, false, signal))).catch(() => undefined);
  }

  private async say(type: string, partitions: number, always = false, signal?: AbortSignal): Promise<void> {
    const key = this.layout.layoutOf(type);
    if (partitions === 1 && !always && (await this.client.exists(key)) === 0) return;
    if (signal?.aborted) return;
    await this.client.hset(key, String(partitions), String(Date.now()));
  }

  /**
   * Says that an instance with `partitions` started handling the type: the
   * setting of the instance that started last is the one events move to.
   */
  async claimCurrent(type: string, partitions: number): Promise<void> {
    await this.bounded(() => this.client.hset(this.layout.layoutOf(type), CURRENT, String(partitions), String(partitions), String(Date.now())));
  }

  /** The partitions settings instances announced, when each last did, and the current one (undefined before any instance said). */
  async settings(type: string): Promise<{ current: number | undefined; all: Array<{ partitions: number; at: number }> }> {
    const all = await this.bounded(() => this.client.hgetall(this.layout.layoutOf(type)));
    const current = all[CURRENT] === undefined ? undefined : Number(all[CURRENT]);
    return {
      current,
      all: Object.entries(all)
        .filter(([field]) => field !== CURRENT)
        .map(([partitions, at]) => ({ partitions: Number(partitions), at: Number(at) })),
    };
  }

  /** Forgets settings no instance announced since `before` (ms). */
  async forgetSettings(type: string, partitions: readonly number[]): Promise<void> {
    if (partitions.length > 0) await this.bounded(() => this.client.hdel(this.layout.layoutOf(type), ...partitions.map(String)));
  }

  /**
   * Every queue of the type, under any partitions setting, holding stored or
   * moving events, given this instance has `partitions`. Three probes tell
   * whether another setting left any ({type}, {type#0} and {type#partitions}:
   * one of them is another setting's, if any other was used); only then is
   * each possible tag probed. Ids another setting put in this one's queues
   * (4 -> 8) are not found so: they are still handled there; settings
   * announced from 0.5 on find them (src/runtime/repartitioner.ts).
   */
  async queuesInUse(type: string, partitions: number): Promise<TypeKeys[]> {
    const hints = [this.layout.probeKeys(type), this.layout.probeKeys(type, 0), this.layout.probeKeys(type, partitions)];
    const mine = new Set(this.layout.partitionsOf({ type, partitions }).map((keys) => keys.tag));
    const hinted = await Promise.all(hints.map((keys) => (mine.has(keys.tag) ? 0 : this.bounded(() => this.client.exists(keys.meta, keys.moving)))));
    if (hinted.every((n) => n === 0)) return [];
    const candidates = [this.layout.forType(type), ...Array.from({ length: MAX_PARTITIONS }, (_, p) => this.layout.forType(type, p))];
    const inUse = (keys: TypeKeys) => this.bounded(() => this.client.exists(keys.meta, keys.moving));
    let found: number[];
    if (this.client.isCluster) {
      found = await Promise.all(candidates.map(inUse));
    } else {
      const pipeline = this.client.pipeline();
      for (const keys of candidates) pipeline.exists(keys.meta, keys.moving);
      found = ((await this.bounded(() => pipeline.exec())) ?? []).map(([error, n]) => {
        if (error) throw error;
        return Number(n);
      });
    }
    return candidates.filter((_, i) => found[i]! > 0);
  }

  /** The queues of a partitions setting. */
  queuesOf(type: string, partitions: number): TypeKeys[] {
    return this.layout.partitionsOf({ type, partitions });
  }

  /** Whether a queue holds stored or moving events. */
  async holdsAny(keys: TypeKeys): Promise<boolean> {
    // Flow notices not yet applied (since 0.6) keep a queue in use until they are.
    return (await this.bounded(() => this.client.exists(keys.meta, keys.moving, keys.notices, keys.noticesApplied))) > 0;
  }

  /**
   * Moves every event of `source` whose queue under `route` is another one
   * (all of them, for a queue `route` does not have), step by step; events in
   * flight stay until their lease ends. Resolves how many were moved.
   */
  async moveOut(source: TypeKeys, route: EventRoute): Promise<{ moved: number; left: number }> {
    // The flow notices of children settled here before the move reach their parents (since 0.6).
    await this.flows.deliver(source);
    let moved = await this.finishMoves(source, route);
    let left = 0;
    // Expired leases come back to READY, so they can move; due events go to READY here first.
    await this.scripts.dispatchDue(source, 1_000);
    let cursor = '0';
    do {
      const [next, flat] = await this.bounded(() => this.client.hscan(source.meta, cursor, 'COUNT', 1_000));
      cursor = next;
      const ids: string[] = [];
      for (let i = 0; i < flat.length; i += 2) {
        const id = flat[i]!;
        if (this.layout.forEvent(route, id) !== source) ids.push(id);
      }
      for (let i = 0; i < ids.length; i += MOVE_STEP) {
        const step = ids.slice(i, i + MOVE_STEP);
        const stored = await this.move(source, route, step);
        moved += stored.stored;
        left += step.length - stored.taken;
      }
    } while (cursor !== '0');
    await this.copyMarks(source, route);
    return { moved, left };
  }

  /**
   * Copies the idempotency marks of ids that belong to another queue under
   * `route` there (the later end wins), so a late re-send of an event handled
   * before the change is still a duplicate. They stay here too, for instances
   * of the old setting, until their window ends.
   */
  private async copyMarks(source: TypeKeys, route: EventRoute): Promise<void> {
    let cursor = '0';
    do {
      const [next, flat] = await this.bounded(() => this.client.zscan(source.recent, cursor, 'COUNT', 1_000));
      cursor = next;
      const byTarget = new Map<TypeKeys, string[]>();
      for (let i = 0; i < flat.length; i += 2) {
        const target = this.layout.forEvent(route, flat[i]!);
        if (target !== source) byTarget.set(target, [...(byTarget.get(target) ?? []), flat[i + 1]!, flat[i]!]);
      }
      await Promise.all([...byTarget].map(([target, marks]) => this.bounded(() => this.client.zadd(target.recent, 'GT', ...marks))));
    } while (cursor !== '0');
  }

  /**
   * Moves the recurring schedules kept where another setting keeps them
   * ({type}, or {type#0} of a partitioned type) to where `route` keeps them,
   * and points the index of schedule types at `route`. A schedule defined
   * anew under `route` meanwhile stays as it is. Resolves how many moved.
   */
  async moveSchedules(from: number, route: EventRoute): Promise<number> {
    const source = this.layout.recurringOf({ type: route.type, partitions: from });
    const target = this.layout.recurringOf(route);
    if (source === target) return 0;
    const definitions = await this.bounded(() => this.client.hgetall(source.recurring));
    let moved = 0;
    for (const [name, json] of Object.entries(definitions)) {
      const definition = JSON.parse(json) as { partitions: number };
      // Written first, then deleted: a crash between leaves a copy the next sweep deletes, never no schedule.
      moved += await this.bounded(() => this.client.hsetnx(target.recurring, name, JSON.stringify({ ...definition, partitions: route.partitions })));
      await this.bounded(() => this.client.hdel(source.recurring, name));
    }
    if (moved > 0 || (await this.bounded(() => this.client.hexists(this.layout.recurringIndex, route.type)))) {
      await this.bounded(() => this.client.hset(this.layout.recurringIndex, route.type, String(route.partitions)));
    }
    return moved;
  }

  /** Sends on what a crashed sweep left in `source`'s moving hash; resolves how many events were stored anew. */
  async finishMoves(source: TypeKeys, route: EventRoute): Promise<number> {
    const left = await this.bounded(() => this.client.hgetall(source.moving));
    const byToken = new Map<string, Array<{ id: string; record: string }>>();
    for (const [id, value] of Object.entries(left)) {
      const bar = value.indexOf('|');
      const second = value.indexOf('|', bar + 1);
      if (Date.now() - Number(value.slice(bar + 1, second)) < MOVE_GRACE_MS) continue;
      const token = value.slice(0, bar);
      byToken.set(token, [...(byToken.get(token) ?? []), { id, record: value.slice(second + 1) }]);
    }
    let stored = 0;
    for (const [token, records] of byToken) stored += await this.deliver(source, route, token, records);
    return stored;
  }

  /** One move: how many of `ids` were taken out (the rest are in flight, or gone), and how many stored anew. */
  private async move(source: TypeKeys, route: EventRoute, ids: readonly string[]): Promise<{ taken: number; stored: number }> {
    const token = randomBytes(8).toString('hex');
    const records = await this.scripts.migrateOut(source, token, ids);
    return { taken: records.length, stored: await this.deliver(source, route, token, records) };
  }

  /** Steps two and three of a move: into each record's new queue, then out of the moving hash. */
  private async deliver(source: TypeKeys, route: EventRoute, token: string, records: ReadonlyArray<{ id: string; record: string }>): Promise<number> {
    if (records.length === 0) return 0;
    const byTarget = new Map<TypeKeys, Array<{ id: string; record: string }>>();
    for (const r of records) {
      const target = this.layout.forEvent(route, r.id);
      byTarget.set(target, [...(byTarget.get(target) ?? []), r]);
    }
    let stored = 0;
    for (const [target, moving] of byTarget)
      stored += await this.scripts.migrateIn(
        target,
        token,
        moving.map((r) => r.record),
      );
    // Only this move's records: the token fences a resend for a day (lua/migrate-in.lua).
    await this.scripts.migrateDone(
      source,
      token,
      records.map((r) => r.id),
    );
    return stored;
  }
}
