import type { Cluster, Redis } from 'ioredis';
import { type DelayedEventInstance, type EventClass, type EventRoute, eventRouteOf } from '../core/delayed-event.decorator';
import { type Delay, dateToMillis, delayToMillis } from '../core/duration';
import { parseEnvelope } from '../core/envelope';
import { InvalidArgumentError, describe } from '../core/errors';
import type { EventCodec } from '../core/event-codec';
import type { EventContext } from '../core/event-context';
import { type JsonEvent, parseStoredBody } from '../core/stored-body';
import type { DueSpec, LuaScripts, RedisClient } from '../redis/lua-scripts';
import { DEFAULT_GROUP, LEASE_PIN, type RedisLayout, type TypeKeys } from '../redis/redis-layout';
import { GROUP_NAME_RULE, checkIdArgument, checkTypeName, isGroupName } from '../core/names';
import { ACTIVITY_RETENTION_MS, type ActivitySlot, readActivity } from '../runtime/activity-log';
import { type DueTimeline, readDueTimeline } from './due-timeline';

/** Where a stored event is, in its type's (or group's) keys. */
export type EventState = 'scheduled' | 'ready' | 'in-flight' | 'dead';
export const EVENT_STATES: readonly EventState[] = ['scheduled', 'ready', 'in-flight', 'dead'];

/** How many events are in each state. */
export interface StateCounts {
  readonly scheduled: number;
  readonly ready: number;
  readonly inFlight: number;
  readonly dead: number;
}

/** counts(): the type's own keys (its default group), and each registered group's, when it has any. */
export interface EventCounts extends StateCounts {
  readonly groups?: Readonly<Record<string, StateCounts>>;
}

/** A type found under the prefix. */
export interface EventTypeInfo {
  readonly type: string;
  /** 1 for a type without partitions; else one more than the highest partition that holds a key. */
  readonly partitions: number;
  /** Registered subscriber groups (`default` among them once registered), sorted; empty when none are. */
  readonly groups: readonly string[];
  /** Paused (in every partition found). */
  readonly paused: boolean;
}

/** One stored event as find() and list() see it. */
export interface InspectedEvent<T = JsonEvent> {
  readonly id: string;
  readonly state: EventState;
  readonly dueAt: Date;
  /** Attempts started: 0 while never handled; in flight, the one running. */
  readonly attempt: number;
  /** When it was first enqueued; undefined when its stored body does not say. */
  readonly enqueuedAt: Date | undefined;
  readonly context: EventContext;
  /** The last error recorded (a failed attempt, or why it is dead), if any. */
  readonly lastError: string | undefined;
  /** The event (a class instance, or for a type name the payload as parsed JSON); undefined when it cannot be decoded. */
  readonly event: T | undefined;
  /** Why `event` is undefined. */
  readonly decodeError?: string;
  /** In flight: when its lease runs out and another instance may take it. */
  readonly leaseExpiresAt?: Date;
  /** Dead: when it was dead-lettered. */
  readonly deadLetteredAt?: Date;
  /** find() only, for a type with registered groups: the event's state in each group that still holds it. */
  readonly groups?: Readonly<Record<string, EventState>>;
}

export interface ListOptions {
  /** Events to skip (default 0). */
  readonly offset?: number;
  /** Page size, 1 to 1,000 (default 100). */
  readonly limit?: number;
  /** Subscriber group (default: the default group, the type's own keys). */
  readonly group?: string;
}

/** An event class, or its type name (payloads then come back as parsed JSON). */
export type EventTarget<T extends DelayedEventInstance = DelayedEventInstance> = EventClass<T> | string;

export const MAX_PAGE = 1_000;

export interface DueTimelineOptions {
  /** How far ahead, ms: 1 s to 30 days (default 1 hour). */
  readonly horizonMs?: number;
  /** Equal slots the horizon is cut into, 1 to 500 (default 60). */
  readonly slots?: number;
  /** Subscriber group whose retry schedule to read (default: the type's own schedule). */
  readonly group?: string;
}
/** Partitions a type may have (@DelayedEvent allows up to 1,024): a type name is resolved by probing them all. */
const MAX_PARTITIONS = 1_024;
/** Bucket names read per call while walking a schedule. */
const BUCKET_WALK = 256;
const SCAN_COUNT = 1_000;
/** Type names the decorator refuses: they would break the keys' hash tag. */
/** LEASE_PIN as ioredis reads it back (its 0xFF byte is no UTF-8): what a reply holds in its place. */
const PIN_AS_READ = LEASE_PIN.toString('utf8');
/** Lease scores of 0.2 were the expiry alone; scaled ones are expiry * 1000 + three digits of the claim (lua/includes/lease.lua). */
const SCALED_LEASE_FROM = 1e14;

/** A type as the caller named it: its keys per partition (only those found, for a name). */
interface Resolved {
  readonly type: string;
  readonly route: EventRoute;
  readonly eventClass: EventClass | undefined;
  readonly queues: readonly TypeKeys[];
  /** The partitions are known (a class); for a name, `queues` are the partitions found. */
  readonly exact: boolean;
}

interface Entry {
  readonly id: string;
  /** Sort key across partitions: due, lease expiry, dead-lettered at, or position. */
  readonly key: number;
  /** The score read with it (lease or dead-lettered at), if any. */
  readonly score?: number;
}

/** A queue's counts as one pipeline reads them, with what the gauges also need. */
interface QueueSample {
  readonly counts: StateCounts;
  readonly paused: boolean;
  readonly groups: readonly string[];
}

function pipelineValues(replies: Array<[Error | null, unknown]> | null): unknown[] {
  return (replies ?? []).map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}

function sum(all: readonly StateCounts[]): StateCounts {
  return all.reduce<StateCounts>((a, b) => ({ scheduled: a.scheduled + b.scheduled, ready: a.ready + b.ready, inFlight: a.inFlight + b.inFlight, dead: a.dead + b.dead }), {
    scheduled: 0,
    ready: 0,
    inFlight: 0,
    dead: 0,
  });
}

/**
 * Reads and steers what is stored (docs/api.md, "Inspection"): which types
 * exist, how many events are in each state, one event, a page of a state;
 * moves an event's due time; pauses a type. Every call is bounded: counts are
 * O(1) commands per queue, find is single-key lookups, a page at most 1,000
 * events. Nothing here runs a handler.
 */
export class Inspector {
  constructor(
    private readonly client: RedisClient,
    private readonly layout: RedisLayout,
    private readonly codec: EventCodec,
    private readonly scripts: LuaScripts,
  ) {}

  /**
   * Every type with stored events, registered groups or a pause under this
   * prefix, whoever stored them: SCAN over every master (never KEYS), for the
   * keys that only a type in use has (`:m`, `:groups`, `:p`), parsing their hash tag.
   */
  async types(): Promise<EventTypeInfo[]> {
    const prefix = `${this.layout.prefix}:{`;
    const tags = new Map<string, Set<string>>(); // tag -> which of m, groups, p it has
    for (const master of await this.masters()) {
      let cursor = '0';
      do {
        const [next, keys] = await master.scan(cursor, 'MATCH', `${prefix}*}:[mgp]*`, 'COUNT', SCAN_COUNT);
        cursor = next;
        for (const key of keys) {
          const close = key.indexOf('}', prefix.length);
          if (!key.startsWith(prefix) || close < 0) continue;
          const suffix = key.slice(close + 2);
          if (key[close + 1] !== ':' || (suffix !== 'm' && suffix !== 'groups' && suffix !== 'p')) continue;
          const tag = key.slice(prefix.length, close);
          const seen = tags.get(tag) ?? new Set<string>();
          seen.add(suffix);
          tags.set(tag, seen);
        }
      } while (cursor !== '0');
    }
    const byType = new Map<string, { partitions: Set<number>; unpartitioned: boolean; groupTags: string[]; pausedTags: Set<string> }>();
    for (const [tag, kinds] of tags) {
      const hash = tag.lastIndexOf('#');
      const type = hash < 0 ? tag : tag.slice(0, hash);
      const partition = hash < 0 ? undefined : Number(tag.slice(hash + 1));
      if (type.length === 0 || (partition !== undefined && !(Number.isInteger(partition) && partition >= 0 && partition < MAX_PARTITIONS))) continue;
      const info = byType.get(type) ?? { partitions: new Set<number>(), unpartitioned: false, groupTags: [], pausedTags: new Set<string>() };
      if (partition === undefined) info.unpartitioned = true;
      else info.partitions.add(partition);
      if (kinds.has('groups')) info.groupTags.push(tag);
      if (kinds.has('p')) info.pausedTags.add(tag);
      byType.set(type, info);
    }
    const found = await Promise.all(
      [...byType].map(async ([type, info]): Promise<EventTypeInfo> => {
        const partitions = info.unpartitioned || info.partitions.size === 0 ? 1 : Math.max(...info.partitions) + 1;
        const queueTags = partitions === 1 && info.unpartitioned ? [type] : [...info.partitions].map((p) => `${type}#${p}`);
        const groups = new Set<string>();
        const registries = await Promise.all(info.groupTags.map((tag) => this.client.hkeys(`${this.layout.prefix}:{${tag}}:groups`)));
        for (const names of registries) for (const name of names) groups.add(name);
        return { type, partitions, groups: [...groups].sort(), paused: queueTags.length > 0 && queueTags.every((tag) => info.pausedTags.has(tag)) };
      }),
    );
    return found.sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
  }

  /** Events in each state, of the type's own keys and of each registered group; undefined for a type name nothing is stored under. */
  async counts(target: EventTarget): Promise<EventCounts | undefined> {
    const resolved = await this.resolve(target);
    return resolved && (await this.routeSample(resolved.queues)).counts;
  }

  /** What the gauges report of a type: its counts and whether it is paused, read as counts() reads them. */
  async gaugeSample(route: EventRoute): Promise<{ counts: EventCounts; paused: boolean }> {
    return this.routeSample(this.layout.partitionsOf(route));
  }

  /** One event, or undefined when the type or id is not stored. */
  async find<T extends DelayedEventInstance>(target: EventTarget<T>, id: string): Promise<InspectedEvent<T | JsonEvent> | undefined> {
    checkIdArgument(id);
    const resolved = await this.resolve(target);
    const keys = resolved && (await this.queueOf(resolved, id));
    if (!resolved || !keys) return undefined;
    // One transaction: the event cannot move between the lookups.
    const [value, leaseScore, deadScore, position, lastError, registry, delivered] = pipelineValues(
      await this.client.multi().hget(keys.meta, id).zscore(keys.inFlight, id).zscore(keys.dead, id).lpos(keys.ready, id).hget(keys.errors, id).hkeys(keys.groups).hexists(keys.pending, id).exec(),
    ) as [string | null, string | null, string | null, number | null, string | null, string[], number];
    if (value === null) return undefined;
    const envelope = parseEnvelope(value);

    let own: EventState | undefined;
    if (leaseScore !== null) own = 'in-flight';
    else if (deadScore !== null) own = 'dead';
    else if (position !== null) own = 'ready';
    // Delivered to groups, and in none of the type's own states but its schedule:
    // in the default group's retries, or held by named groups only.
    else if (delivered !== 1 || (await this.isScheduled(keys, id, envelope.dueAt))) own = 'scheduled';

    const named = registry.filter((g) => g !== DEFAULT_GROUP).sort();
    let groups: Record<string, EventState> | undefined;
    if (registry.length > 0) {
      groups = {};
      if (registry.includes(DEFAULT_GROUP) && own) groups[DEFAULT_GROUP] = own;
      for (const group of named) {
        const state = delivered === 1 ? await this.groupState(this.layout.forGroup(keys, group), id) : own === 'scheduled' ? 'scheduled' : undefined;
        if (state) groups[group] = state;
      }
    }
    const state = own ?? (['in-flight', 'ready', 'scheduled', 'dead'] as const).find((s) => Object.values(groups ?? {}).includes(s));
    if (!state) return undefined;
    return {
      ...this.fields(resolved, id, value, lastError ?? undefined, {
        state,
        dueAt: envelope.dueAt,
        attempt: leaseScore !== null && Number(leaseScore) >= SCALED_LEASE_FROM ? envelope.attempt + 1 : envelope.attempt,
      }),
      ...(leaseScore !== null ? { leaseExpiresAt: new Date(leaseExpiry(Number(leaseScore))) } : {}),
      ...(deadScore !== null ? { deadLetteredAt: new Date(Number(deadScore)) } : {}),
      ...(groups ? { groups } : {}),
    } as InspectedEvent<T | JsonEvent>;
  }

  /**
   * One page of the events in `state`: scheduled in due order, ready in
   * dispatch order, in flight by lease expiry, dead oldest first. Across
   * partitions, each partition's first offset + limit are merged.
   */
  async list<T extends DelayedEventInstance>(target: EventTarget<T>, state: EventState, options: ListOptions = {}): Promise<Array<InspectedEvent<T | JsonEvent>>> {
    if (!EVENT_STATES.includes(state)) throw new InvalidArgumentError('state', `expected one of ${EVENT_STATES.join(', ')}, got ${JSON.stringify(state)}`);
    const offset = pageNumber('offset', options.offset, 0, 0, Number.MAX_SAFE_INTEGER);
    const limit = pageNumber('limit', options.limit, 100, 1, MAX_PAGE);
    const group = groupOption(options.group);
    const resolved = await this.resolve(target);
    if (!resolved) return [];
    const queues = resolved.queues.map((keys) => this.layout.forGroup(keys, group));
    const single = queues.length === 1;
    const perQueue = await Promise.all(queues.map((keys) => this.entries(keys, state, single ? offset : 0, single ? limit : offset + limit)));
    const page = single
      ? perQueue[0]!.map((entry) => ({ entry, keys: queues[0]! }))
      : perQueue
          .flatMap((entries, q) => entries.map((entry, rank) => ({ entry, keys: queues[q]!, rank, q })))
          .sort((a, b) => a.entry.key - b.entry.key || a.rank - b.rank || a.q - b.q)
          .slice(offset, offset + limit);
    // Per queue, one pipeline for the envelopes (and bodies) and errors of its events on the page.
    const byQueue = new Map<TypeKeys, string[]>();
    for (const { entry, keys } of page) byQueue.set(keys, [...(byQueue.get(keys) ?? []), entry.id]);
    const read = new Map<string, { header: string | null; body: string | null; error: string | null }>();
    await Promise.all(
      [...byQueue].map(async ([keys, ids]) => {
        const pipeline = this.client.pipeline().hmget(keys.meta, ...ids).hmget(keys.errors, ...ids);
        if (keys.sharedMeta !== keys.meta) pipeline.hmget(keys.sharedMeta, ...ids);
        const [headers, errors, bodies = headers] = pipelineValues(await pipeline.exec()) as Array<Array<string | null>>;
        ids.forEach((id, i) => read.set(`${keys.tag}\n${id}`, { header: headers![i] ?? null, body: bodies![i] ?? null, error: errors![i] ?? null }));
      }),
    );
    const events: Array<InspectedEvent<T | JsonEvent>> = [];
    for (const { entry, keys } of page) {
      const stored = read.get(`${keys.tag}\n${entry.id}`);
      // Gone between the two reads (handled, cancelled): not on the page.
      if (!stored?.header || !stored.body) continue;
      const header = parseEnvelope(stored.header);
      const scaled = state === 'in-flight' && entry.score !== undefined && entry.score >= SCALED_LEASE_FROM;
      events.push({
        ...this.fields(resolved, entry.id, stored.body, stored.error ?? undefined, { state, dueAt: header.dueAt, attempt: scaled ? header.attempt + 1 : header.attempt }),
        ...(state === 'in-flight' && entry.score !== undefined ? { leaseExpiresAt: new Date(leaseExpiry(entry.score)) } : {}),
        ...(state === 'dead' && entry.score !== undefined ? { deadLetteredAt: new Date(entry.score) } : {}),
      } as InspectedEvent<T | JsonEvent>);
    }
    return events;
  }

  /** How many scheduled events fall due in each slot from now to the horizon; undefined for a type name nothing is stored under. */
  async dueTimeline(target: EventTarget, options: DueTimelineOptions = {}): Promise<DueTimeline | undefined> {
    const horizonMs = pageNumber('horizonMs', options.horizonMs, 3_600_000, 1_000, 30 * 86_400_000);
    const slots = pageNumber('slots', options.slots, 60, 1, 500);
    const group = groupOption(options.group);
    const resolved = await this.resolve(target);
    if (!resolved) return undefined;
    return readDueTimeline(this.client, resolved.queues.map((keys) => this.layout.forGroup(keys, group)), Date.now(), horizonMs, slots);
  }

  /**
   * What every instance recorded of the type (option recordActivity) per
   * 10-second slot over the last `windowMs` (at most an hour), oldest first.
   */
  async activity(target: EventTarget, windowMs = 900_000): Promise<ActivitySlot[]> {
    const window = pageNumber('windowMs', windowMs, 900_000, 10_000, ACTIVITY_RETENTION_MS);
    const type = typeof target === 'string' ? checkTypeName(target) : eventRouteOf(target).type;
    const now = Date.now();
    return readActivity(this.client, this.layout, type, now - window, now);
  }

  /**
   * Moves a scheduled or ready event to `delayOrDate` from now (or to that
   * date), keeping its payload, context and attempts. Resolves false when the
   * event is not stored, or is in flight or dead.
   */
  async reschedule(target: EventTarget, id: string, delayOrDate: Delay | Date): Promise<boolean> {
    const due: DueSpec = delayOrDate instanceof Date ? { atMs: dateToMillis(delayOrDate) } : { delayMs: delayToMillis(delayOrDate) };
    return this.moveDue(target, id, due);
  }

  /** Makes a scheduled or ready event due at once; false when it is not stored, or in flight or dead. */
  runNow(target: EventTarget, id: string): Promise<boolean> {
    return this.moveDue(target, id, { delayMs: 0 });
  }

  /**
   * Pauses the type for every instance, across restarts: a key per partition
   * (`<prefix>:{<tag>}:p`) that dispatch and claims honour. Enqueues still
   * store. Resolves false for a type name nothing is stored under.
   */
  async pause(target: EventTarget): Promise<boolean> {
    const resolved = await this.resolve(target);
    if (!resolved) return false;
    await Promise.all(resolved.queues.map((keys) => this.client.set(keys.paused, '1')));
    return true;
  }

  /** Undoes pause(); resolves false for a type name nothing is stored under. */
  async resume(target: EventTarget): Promise<boolean> {
    const resolved = await this.resolve(target);
    if (!resolved) return false;
    await Promise.all(resolved.queues.map((keys) => this.client.del(keys.paused)));
    return true;
  }

  /** Whether the type is paused (in every partition). */
  async isPaused(target: EventTarget): Promise<boolean> {
    const resolved = await this.resolve(target);
    if (!resolved) return false;
    const flags = await Promise.all(resolved.queues.map((keys) => this.client.get(keys.paused)));
    return flags.every((flag) => flag !== null);
  }

  /** The type's partitions: all of them for a class, those holding anything for a name; undefined for a name nothing is stored under. */
  async queuesOf(target: EventTarget): Promise<readonly TypeKeys[] | undefined> {
    return (await this.resolve(target))?.queues;
  }

  /** The partition whose meta hash holds `id`; for a class, where the id belongs whether or not it is stored. */
  async queueFor(target: EventTarget, id: string): Promise<TypeKeys | undefined> {
    const resolved = await this.resolve(target);
    return resolved && this.queueOf(resolved, id);
  }

  private async moveDue(target: EventTarget, id: string, due: DueSpec): Promise<boolean> {
    checkIdArgument(id);
    const resolved = await this.resolve(target);
    const keys = resolved && (await this.queueOf(resolved, id));
    if (!keys) return false;
    return (await this.scripts.reschedule(keys, id, due)) !== undefined;
  }

  /** A class's route, or a type name's partitions as found in Redis (probing each possible tag: O(1) calls, whatever the keyspace). */
  private async resolve(target: EventTarget): Promise<Resolved | undefined> {
    if (typeof target !== 'string') {
      const route = eventRouteOf(target);
      return { type: route.type, route, eventClass: target, queues: this.layout.partitionsOf(route), exact: true };
    }
    checkTypeName(target);
    const inUse = (keys: TypeKeys) => this.client.exists(keys.meta, keys.groups, keys.paused);
    const whole = this.layout.forType(target);
    if ((await inUse(whole)) > 0) return { type: target, route: { type: target, partitions: 1 }, eventClass: undefined, queues: [whole], exact: true };
    const candidates = Array.from({ length: MAX_PARTITIONS }, (_, p) => this.layout.forType(target, p));
    let found: number[];
    if (this.client.isCluster) {
      found = await Promise.all(candidates.map(inUse));
    } else {
      const pipeline = this.client.pipeline();
      for (const keys of candidates) pipeline.exists(keys.meta, keys.groups, keys.paused);
      found = pipelineValues(await pipeline.exec()) as number[];
    }
    const queues = candidates.filter((_, p) => found[p]! > 0);
    if (queues.length === 0) return undefined;
    let partitions = 0;
    found.forEach((n, p) => (partitions = n > 0 ? p + 1 : partitions));
    return { type: target, route: { type: target, partitions }, eventClass: undefined, queues, exact: false };
  }

  /** For a class, the id's partition; for a name, the partition found holding it (undefined: none). */
  private async queueOf(resolved: Resolved, id: string): Promise<TypeKeys | undefined> {
    if (resolved.exact) return this.layout.forEvent(resolved.route, id);
    const held = await Promise.all(resolved.queues.map((keys) => this.client.hexists(keys.meta, id)));
    return resolved.queues[held.findIndex((n) => n === 1)];
  }

  /** The counts of a type's partitions, summed, with its groups'; one pipeline per queue, each command O(1). */
  private async routeSample(queues: readonly TypeKeys[]): Promise<{ counts: EventCounts; paused: boolean }> {
    const samples = await Promise.all(queues.map((keys) => this.queueSample(keys)));
    const total = sum(samples.map((s) => s.counts));
    const paused = samples.every((s) => s.paused);
    const groupNames = [...new Set(samples.flatMap((s) => s.groups))].sort();
    if (groupNames.length === 0) return { counts: total, paused };
    const groups: Record<string, StateCounts> = {};
    for (const group of groupNames) {
      groups[group] = group === DEFAULT_GROUP ? total : sum(await Promise.all(queues.map(async (keys) => (await this.queueSample(this.layout.forGroup(keys, group), false)).counts)));
    }
    return { counts: { ...total, groups }, paused };
  }

  /**
   * HLEN, LLEN, ZCARD and ZSCORE of one queue in one pipeline (one slot, so a
   * Cluster takes it too). Every stored event is in exactly one state and the
   * schedule is spread over buckets: what is in no other state is scheduled.
   * The in-flight set's pin is no event. Once a type has named groups, its
   * meta hash also keeps the bodies of events delivered to them (counted in
   * the pending hash): those are not the type's own. With the default group
   * registered too, the events it holds are among them, so only the larger of
   * the two is taken off (its retries of delivered events are then not counted).
   */
  private async queueSample(keys: TypeKeys, withFlags = true): Promise<QueueSample> {
    const pipeline = this.client.pipeline().hlen(keys.meta).llen(keys.ready).zcard(keys.inFlight).zscore(keys.inFlight, LEASE_PIN).zcard(keys.dead);
    if (withFlags) pipeline.hlen(keys.pending).get(keys.paused).hkeys(keys.groups);
    const replies = (await pipeline.exec()) ?? [];
    const [stored = 0, ready = 0, inFlightMembers = 0, pinScore = 0, dead = 0, pending = 0] = [0, 1, 2, 3, 4, 5].map((i) => Number(replies[i]?.[1] ?? 0));
    const inFlight = inFlightMembers - (pinScore > 0 ? 1 : 0);
    const groups = withFlags ? ((replies[7]?.[1] as string[] | undefined) ?? []) : [];
    const held = ready + inFlight + dead;
    const notScheduled = groups.includes(DEFAULT_GROUP) ? Math.max(pending, held) : pending + held;
    return {
      counts: { scheduled: Math.max(0, stored - notScheduled), ready, inFlight, dead },
      paused: withFlags && replies[6]?.[1] != null,
      groups,
    };
  }

  /** A named group's state of an event it was delivered: from its own header hash and state keys. */
  private async groupState(keys: TypeKeys, id: string): Promise<EventState | undefined> {
    const [header, lease, dead, position] = pipelineValues(await this.client.multi().hget(keys.meta, id).zscore(keys.inFlight, id).zscore(keys.dead, id).lpos(keys.ready, id).exec()) as [
      string | null,
      string | null,
      string | null,
      number | null,
    ];
    if (header === null) return undefined;
    if (lease !== null) return 'in-flight';
    if (dead !== null) return 'dead';
    if (position !== null) return 'ready';
    return 'scheduled';
  }

  /**
   * Whether `id` is in the schedule: in a bucket starting at its due time, or
   * at the greatest earliest due below it (lua/includes/schedule.lua), or in 0.1's zset.
   */
  private async isScheduled(keys: TypeKeys, id: string, due: number): Promise<boolean> {
    if ((await this.client.zscore(keys.legacySchedule, id)) !== null) return true;
    const at = await this.client.zrange(keys.schedule, String(due), String(due), 'BYSCORE');
    const below = await this.client.zrange(keys.schedule, `(${due}`, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES');
    const buckets = [...at];
    if (below[1] !== undefined) buckets.push(...(await this.client.zrange(keys.schedule, below[1], below[1], 'BYSCORE')));
    if (due === 0) buckets.push(...(await this.client.zrange(keys.schedule, '0', '-1')));
    for (const bucket of buckets) if ((await this.client.zscore(`${keys.schedule}:${bucket}`, id)) !== null) return true;
    return false;
  }

  /** The first `count` entries of a state from position `from`, in its order. */
  private async entries(keys: TypeKeys, state: EventState, from: number, count: number): Promise<Entry[]> {
    switch (state) {
      case 'scheduled':
        return this.scheduledEntries(keys, from, count);
      case 'ready': {
        const ids = await this.client.lrange(keys.ready, from, from + count - 1);
        return ids.map((id, i) => ({ id, key: from + i }));
      }
      case 'in-flight':
      case 'dead': {
        const zset = state === 'dead' ? keys.dead : keys.inFlight;
        // The pin sorts after every lease, so it never shifts the ranks of events before it.
        const flat = await this.client.zrange(zset, String(from), String(from + count - 1), 'WITHSCORES');
        const entries: Entry[] = [];
        for (let i = 0; i < flat.length; i += 2) {
          if (flat[i] === PIN_AS_READ) continue;
          const score = Number(flat[i + 1]);
          entries.push({ id: flat[i]!, key: state === 'dead' ? score : leaseExpiry(score), score });
        }
        return entries;
      }
    }
  }

  /**
   * Walks the schedule's buckets in index order, each sorted by due: buckets
   * hold disjoint ranges of due times (lua/includes/schedule.lua), so this is
   * due order. Whole buckets before `from` are skipped by their size alone.
   */
  private async scheduledEntries(keys: TypeKeys, from: number, count: number): Promise<Entry[]> {
    const legacy = await this.client.zcard(keys.legacySchedule);
    if (legacy > 0) {
      // 0.1's zset, still being emptied: merge it with the buckets' first from + count.
      const [buckets, flat] = await Promise.all([this.bucketEntries(keys, 0, from + count), this.client.zrange(keys.legacySchedule, '0', String(from + count - 1), 'WITHSCORES')]);
      const old: Entry[] = [];
      for (let i = 0; i < flat.length; i += 2) old.push({ id: flat[i]!, key: Number(flat[i + 1]) });
      return [...buckets, ...old].sort((a, b) => a.key - b.key).slice(from, from + count);
    }
    return this.bucketEntries(keys, from, count);
  }

  private async bucketEntries(keys: TypeKeys, from: number, count: number): Promise<Entry[]> {
    const entries: Entry[] = [];
    let skip = from;
    // A bucket holds 48 to 64 events once full: read about as many names as the page needs, more while skipping.
    let chunk = Math.min(BUCKET_WALK, Math.ceil((from + count) / 32) + 2);
    for (let start = 0; entries.length < count; start += chunk, chunk = Math.min(BUCKET_WALK, chunk * 2)) {
      const names = await this.client.zrange(keys.schedule, String(start), String(start + chunk - 1));
      if (names.length === 0) break;
      const sizing = this.client.pipeline();
      for (const name of names) sizing.zcard(`${keys.schedule}:${name}`);
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
      const reading = this.client.pipeline();
      for (const r of ranges) reading.zrange(`${keys.schedule}:${r.name}`, String(r.from), String(r.to), 'WITHSCORES');
      for (const flat of pipelineValues(await reading.exec()) as string[][]) {
        for (let i = 0; i < flat.length; i += 2) entries.push({ id: flat[i]!, key: Number(flat[i + 1]) });
      }
    }
    return entries.slice(0, count);
  }

  /** The fields every state shares, in the order they print; the body is read from `value`, a full envelope. */
  private fields(resolved: Resolved, id: string, value: string, lastError: string | undefined, at: { state: EventState; dueAt: number; attempt: number }) {
    const { body } = parseEnvelope(value);
    let event: unknown;
    let context: EventContext = {};
    let enqueuedAt: number | undefined;
    let decodeError: string | undefined;
    if (resolved.eventClass) {
      try {
        const decoded = this.codec.decode(resolved.eventClass, id, body);
        event = decoded.event;
        context = decoded.context;
        enqueuedAt = decoded.enqueuedAt || undefined;
      } catch (error) {
        decodeError = describe(error);
        enqueuedAt = parseStoredBody(id, body).enqueuedAt;
      }
    } else {
      const parsed = parseStoredBody(id, body);
      ({ event, context, enqueuedAt } = parsed);
      decodeError = parsed.error;
    }
    return {
      id,
      state: at.state,
      dueAt: new Date(at.dueAt),
      attempt: at.attempt,
      enqueuedAt: enqueuedAt === undefined ? undefined : new Date(enqueuedAt),
      context,
      lastError,
      event,
      ...(decodeError ? { decodeError } : {}),
    };
  }

  /** The single server, or every master of a Cluster. */
  private async masters(): Promise<Array<Redis | Cluster>> {
    if (!this.client.isCluster) return [this.client];
    const cluster = this.client as Cluster;
    // Before 'ready' the node list still holds startup connections the slot refresh replaces.
    if (cluster.status !== 'ready') await new Promise<void>((resolve, reject) => {
      cluster.once('ready', () => resolve());
      cluster.once('end', () => reject(new Error('the cluster connection ended')));
    });
    return cluster.nodes('master');
  }
}

function leaseExpiry(score: number): number {
  return score >= SCALED_LEASE_FROM ? Math.floor(score / 1000) : score;
}


function pageNumber(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) throw new InvalidArgumentError(name, `must be an integer from ${min} to ${max}, got ${String(value)}`);
  return value;
}

function groupOption(group: string | undefined): string {
  if (group === undefined) return DEFAULT_GROUP;
  if (!isGroupName(group)) throw new InvalidArgumentError('group', `must be ${GROUP_NAME_RULE}; got ${JSON.stringify(group)}`);
  return group;
}
