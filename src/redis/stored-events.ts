import type { Cluster, Redis } from 'ioredis';
import type { EventRoute } from '../core/delayed-event.decorator';
import { parseEnvelope } from '../core/envelope';
import type { RedisClient } from './redis-client';
import { DEFAULT_GROUP, LEASE_PIN, type RedisLayout, type TypeKeys } from './redis-layout';

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

/** One stored event as read, before its body is decoded. */
export interface StoredEvent {
  readonly id: string;
  readonly state: EventState;
  readonly dueAt: number;
  /** Attempts started: 0 while never handled; in flight, the one running. */
  readonly attempt: number;
  /** The stored body (JSON, as the codec wrote it). */
  readonly body: string;
  readonly lastError: string | undefined;
  readonly leaseExpiresAt?: number;
  readonly deadLetteredAt?: number;
  /** For a type with registered groups: the event's state in each group that still holds it. */
  readonly groups?: Readonly<Record<string, EventState>>;
}

/** A dead letter as read, before its body is decoded. */
export interface StoredDeadLetter {
  readonly id: string;
  readonly attempts: number;
  readonly body: string;
  readonly error: string;
  readonly deadLetteredAt: number;
}

/** Partitions a type may have (@DelayedEvent allows up to 1,024): a type name is resolved by probing them all. */
export const MAX_PARTITIONS = 1_024;
/** Bucket names read per call while walking a schedule. */
const BUCKET_WALK = 256;
const SCAN_COUNT = 1_000;
/** LEASE_PIN as ioredis reads it back (its 0xFF byte is no UTF-8): what a reply holds in its place. */
const PIN_AS_READ = LEASE_PIN.toString('utf8');
/** Lease scores of 0.2 were the expiry alone; scaled ones are expiry * 1000 + three digits of the claim (lua/includes/lease-constants.lua). */
const SCALED_LEASE_FROM = 1e14;

interface Entry {
  readonly id: string;
  /** Sort key across partitions: due, lease expiry, dead-lettered at, or position. */
  readonly key: number;
  /** The score read with it (lease or dead-lettered at), if any. */
  readonly score?: number;
}

interface QueueSample {
  readonly counts: StateCounts;
  readonly paused: boolean;
  readonly groups: readonly string[];
}

/** When a lease runs out, from its score. */
export function leaseExpiry(score: number): number {
  return score >= SCALED_LEASE_FROM ? Math.floor(score / 1000) : score;
}

/** The attempt an event in flight runs: a scaled lease (0.3 on) is claimed before its envelope counts the attempt. */
function runningAttempt(envelopeAttempt: number, leaseScore: number): number {
  return leaseScore >= SCALED_LEASE_FROM ? envelopeAttempt + 1 : envelopeAttempt;
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
 * Reads what is stored, and the few plain writes no script makes (a pause):
 * the one place besides lua/ that knows how events are kept (schedule
 * buckets, lease scores, group headers, the pin, 0.1's schedule). The
 * Inspector, the service's gauges and its dead-letter pages call it; every
 * call is bounded (O(1) commands per queue, or a page of at most 1,000).
 */
export class StoredEvents {
  constructor(
    private readonly client: RedisClient,
    private readonly layout: RedisLayout,
  ) {}

  /**
   * Every type with stored events, registered groups or a pause under the
   * prefix: SCAN over every master (never KEYS), for the keys only a type in
   * use has (`:m`, `:groups`, `:p`), parsing their hash tag.
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

  /**
   * A type name's partitions that hold anything (probing each possible tag: O(1)
   * calls, whatever the keyspace), and its route as far as they tell; undefined
   * when nothing is stored under the name.
   */
  async typeByName(type: string): Promise<{ route: EventRoute; queues: readonly TypeKeys[]; exact: boolean } | undefined> {
    const inUse = (keys: TypeKeys) => this.client.exists(keys.meta, keys.groups, keys.paused);
    const whole = this.layout.forType(type);
    if ((await inUse(whole)) > 0) return { route: { type, partitions: 1 }, queues: [whole], exact: true };
    const candidates = Array.from({ length: MAX_PARTITIONS }, (_, p) => this.layout.forType(type, p));
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
    return { route: { type, partitions }, queues, exact: false };
  }

  /** Which of `queues` holds `id` in its meta hash. */
  async queueHolding(queues: readonly TypeKeys[], id: string): Promise<TypeKeys | undefined> {
    const held = await Promise.all(queues.map((keys) => this.client.hexists(keys.meta, id)));
    return queues[held.indexOf(1)];
  }

  /** The counts of a type's partitions, summed, with its groups', and whether it is paused; one pipeline per queue, each command O(1). */
  async counts(queues: readonly TypeKeys[]): Promise<{ counts: EventCounts; paused: boolean }> {
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

  /** One event in `keys` (its queue), with its state in each group; undefined when it is not stored. */
  async read(keys: TypeKeys, id: string): Promise<StoredEvent | undefined> {
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
      id,
      state,
      dueAt: envelope.dueAt,
      attempt: leaseScore !== null ? runningAttempt(envelope.attempt, Number(leaseScore)) : envelope.attempt,
      body: envelope.body,
      lastError: lastError ?? undefined,
      ...(leaseScore !== null ? { leaseExpiresAt: leaseExpiry(Number(leaseScore)) } : {}),
      ...(deadScore !== null ? { deadLetteredAt: Number(deadScore) } : {}),
      ...(groups ? { groups } : {}),
    };
  }

  /**
   * One page of the events in `state`: scheduled in due order, ready in
   * dispatch order, in flight by lease expiry, dead oldest first. Across
   * partitions, each partition's first offset + limit are merged.
   */
  async page(queues: readonly TypeKeys[], state: EventState, offset: number, limit: number): Promise<StoredEvent[]> {
    const single = queues.length === 1;
    const perQueue = await Promise.all(queues.map((keys) => this.entries(keys, state, single ? offset : 0, single ? limit : offset + limit)));
    const page = single
      ? perQueue[0]!.map((entry) => ({ entry, keys: queues[0]! }))
      : perQueue
          .flatMap((entries, q) => entries.map((entry, rank) => ({ entry, keys: queues[q]!, rank, q })))
          .sort((a, b) => a.entry.key - b.entry.key || a.rank - b.rank || a.q - b.q)
          .slice(offset, offset + limit);
    const read = await this.bodies(page.map(({ entry, keys }) => ({ id: entry.id, keys })));
    const events: StoredEvent[] = [];
    for (const { entry, keys } of page) {
      const stored = read.get(`${keys.tag}\n${entry.id}`);
      // Gone between the two reads (handled, cancelled): not on the page.
      if (!stored?.header || !stored.body) continue;
      const header = parseEnvelope(stored.header);
      const leased = state === 'in-flight' && entry.score !== undefined;
      events.push({
        id: entry.id,
        state,
        dueAt: header.dueAt,
        attempt: leased ? runningAttempt(header.attempt, entry.score!) : header.attempt,
        body: parseEnvelope(stored.body).body,
        lastError: stored.error ?? undefined,
        ...(leased ? { leaseExpiresAt: leaseExpiry(entry.score!) } : {}),
        ...(state === 'dead' && entry.score !== undefined ? { deadLetteredAt: entry.score } : {}),
      });
    }
    return events;
  }

  /** One page of a queue's dead letters, oldest first; across queues, each one's first offset + limit merged. */
  async deadLetters(queues: readonly TypeKeys[], offset: number, limit: number): Promise<StoredDeadLetter[]> {
    const letters = (await this.page(queues, 'dead', offset, limit)).map((e) => ({
      id: e.id,
      attempts: e.attempt,
      body: e.body,
      error: e.lastError ?? '',
      deadLetteredAt: e.deadLetteredAt ?? 0,
    }));
    return letters;
  }

  /** Pauses or resumes every queue given: a key each (`<prefix>:{<tag>}:p`) that dispatch and claims honour. */
  async setPaused(queues: readonly TypeKeys[], paused: boolean): Promise<void> {
    await Promise.all(queues.map((keys) => (paused ? this.client.set(keys.paused, '1') : this.client.del(keys.paused))));
  }

  /** Whether every queue given is paused. */
  async isPaused(queues: readonly TypeKeys[]): Promise<boolean> {
    const flags = await Promise.all(queues.map((keys) => this.client.get(keys.paused)));
    return flags.every((flag) => flag !== null);
  }

  /** The envelopes (header, and the body where it lives) and errors of the events given, one pipeline per queue. */
  private async bodies(events: ReadonlyArray<{ id: string; keys: TypeKeys }>): Promise<Map<string, { header: string | null; body: string | null; error: string | null }>> {
    const byQueue = new Map<TypeKeys, string[]>();
    for (const { id, keys } of events) byQueue.set(keys, [...(byQueue.get(keys) ?? []), id]);
    const read = new Map<string, { header: string | null; body: string | null; error: string | null }>();
    await Promise.all(
      [...byQueue].map(async ([keys, ids]) => {
        const pipeline = this.client
          .pipeline()
          .hmget(keys.meta, ...ids)
          .hmget(keys.errors, ...ids);
        if (keys.sharedMeta !== keys.meta) pipeline.hmget(keys.sharedMeta, ...ids);
        const [headers, errors, bodies = headers] = pipelineValues(await pipeline.exec()) as Array<Array<string | null>>;
        ids.forEach((id, i) => read.set(`${keys.tag}\n${id}`, { header: headers![i] ?? null, body: bodies![i] ?? null, error: errors![i] ?? null }));
      }),
    );
    return read;
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
   * at the greatest earliest due below it (lua/includes/schedule-buckets-constants.lua), or in 0.1's zset.
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
   * hold disjoint ranges of due times (lua/includes/schedule-buckets-constants.lua), so this is
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

  /** The single server, or every master of a Cluster. */
  private async masters(): Promise<Array<Redis | Cluster>> {
    if (!this.client.isCluster) return [this.client];
    const cluster = this.client as Cluster;
    // Before 'ready' the node list still holds startup connections the slot refresh replaces.
    if (cluster.status !== 'ready')
      await new Promise<void>((resolve, reject) => {
        cluster.once('ready', () => resolve());
        cluster.once('end', () => reject(new Error('the cluster connection ended')));
      });
    return cluster.nodes('master');
  }
}
