import type { EventRoute } from '../core/delayed-event.decorator';
import { parseEnvelope } from '../core/envelope';
import type { RedisClient } from './redis-client';
import { DEFAULT_GROUP, LEASE_PIN, type RedisLayout, type TypeKeys } from './redis-layout';
import { type Entry, isScheduled, scheduledEntries } from './schedule-reads';
import { type GroupRead, parseErrorLog } from './stored-records';
import { HandledHistory } from './handled-history';
import { scanTypes } from './type-scan';
import { newerVersions, oldestReadyDue, waitsForReader } from './waiting-events';

export { EVENT_STATES, type EventCounts, type EventError, type EventState, type EventTypeInfo, MAX_PARTITIONS, type StateCounts, type StoredDeadLetter, type StoredEvent } from './stored-types';
import { type EventCounts, type EventState, type EventTypeInfo, MAX_PARTITIONS, type StateCounts, type StoredDeadLetter, type StoredEvent } from './stored-types';

/** LEASE_PIN as ioredis reads it back (its 0xFF byte is no UTF-8): what a reply holds in its place. */
const PIN_AS_READ = LEASE_PIN.toString('utf8');
/** Lease scores of 0.2 were the expiry alone; scaled ones are expiry * 1000 + three digits of the claim (lua/includes/lease-constants.lua). */
const SCALED_LEASE_FROM = 1e14;

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

/** Counts of several queues (a type's partitions): summed, and the oldest ready event of all of them. */
function sum(all: readonly StateCounts[]): StateCounts {
  return all.reduce<StateCounts>(
    (a, b) => ({
      scheduled: a.scheduled + b.scheduled,
      ready: a.ready + b.ready,
      inFlight: a.inFlight + b.inFlight,
      dead: a.dead + b.dead,
      waiting: a.waiting + b.waiting,
      ...(a.oldestReadyMs !== undefined || b.oldestReadyMs !== undefined ? { oldestReadyMs: Math.max(a.oldestReadyMs ?? 0, b.oldestReadyMs ?? 0) } : {}),
      ...(a.awaitingNewerVersion || b.awaitingNewerVersion ? { awaitingNewerVersion: (a.awaitingNewerVersion ?? 0) + (b.awaitingNewerVersion ?? 0) } : {}),
    }),
    { scheduled: 0, ready: 0, inFlight: 0, dead: 0, waiting: 0 },
  );
}

/**
 * Reads what is stored, and the few plain writes no script makes (a pause):
 * the one place besides lua/ that knows how events are kept (schedule
 * buckets, lease scores, group headers, the pin, 0.1's schedule). The
 * Inspector, the service's gauges and its dead-letter pages call it; every
 * call is bounded (O(1) commands per queue, or a page of at most 1,000).
 */
export class StoredEvents {
  private readonly history: HandledHistory;

  /** `handledAgeMs`: the services' keepHandled.ageMs, when known: older records are not read (0: no age limit). */
  constructor(
    private readonly client: RedisClient,
    private readonly layout: RedisLayout,
    handledAgeMs = 0,
  ) {
    this.history = new HandledHistory(client, layout, handledAgeMs);
  }

  /** Every type with stored events, registered groups or a pause under the prefix (src/redis/type-scan.ts). */
  types(): Promise<EventTypeInfo[]> {
    return scanTypes(this.client, this.layout);
  }

  /**
   * A type name's partitions that hold anything (probing each possible tag: O(1)
   * calls, whatever the keyspace), and its route as far as they tell; undefined
   * when nothing is stored under the name.
   */
  async typeByName(type: string): Promise<{ route: EventRoute; queues: readonly TypeKeys[]; exact: boolean } | undefined> {
    const inUse = (keys: TypeKeys) => this.client.exists(keys.meta, keys.groups, keys.paused, keys.handledIndex);
    const whole = this.layout.forType(type);
    if ((await inUse(whole)) > 0) return { route: { type, partitions: 1 }, queues: [whole], exact: true };
    const candidates = Array.from({ length: MAX_PARTITIONS }, (_, p) => this.layout.forType(type, p));
    let found: number[];
    if (this.client.isCluster) {
      found = await Promise.all(candidates.map(inUse));
    } else {
      const pipeline = this.client.pipeline();
      for (const keys of candidates) pipeline.exists(keys.meta, keys.groups, keys.paused, keys.handledIndex);
      found = pipelineValues(await pipeline.exec()) as number[];
    }
    const queues = candidates.filter((_, p) => found[p]! > 0);
    if (queues.length === 0) return undefined;
    let partitions = 0;
    found.forEach((n, p) => (partitions = n > 0 ? p + 1 : partitions));
    return { route: { type, partitions }, queues, exact: false };
  }

  /** Which of `queues` holds `id`: stored in its meta hash, or kept in its history. */
  async queueHolding(queues: readonly TypeKeys[], id: string): Promise<TypeKeys | undefined> {
    const held = await Promise.all(queues.map(async (keys) => (await this.client.hexists(keys.meta, id)) === 1 || (await this.client.hexists(keys.handled, id)) === 1));
    return queues[held.indexOf(true)];
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

  /**
   * One event in `keys` (its queue), with its state in each group; undefined
   * when it is neither stored nor, with keepHandled, in the history. An event
   * only named groups hold is described by the first of them that does (its
   * attempt, last error and error log are that group's).
   */
  async read(keys: TypeKeys, id: string): Promise<StoredEvent | undefined> {
    // One transaction: the event cannot move between the lookups.
    const [value, leaseScore, deadScore, position, lastError, registry, delivered, errorLog, handled, waiting] = pipelineValues(
      await this.client
        .multi()
        .hget(keys.meta, id)
        .zscore(keys.inFlight, id)
        .zscore(keys.dead, id)
        .lpos(keys.ready, id)
        .hget(keys.errors, id)
        .hkeys(keys.groups)
        .hexists(keys.pending, id)
        .hget(keys.errorLog, id)
        .hget(keys.handled, id)
        .zscore(keys.waiting, id)
        .exec(),
    ) as [string | null, string | null, string | null, number | null, string | null, string[], number, string | null, string | null, string | null];
    const named = registry.filter((g) => g !== DEFAULT_GROUP).sort();
    if (value === null) return this.history.find(keys, id, handled, registry, named);
    const envelope = parseEnvelope(value);

    let own: EventState | undefined;
    if (waiting !== null) own = 'waiting';
    else if (leaseScore !== null) own = 'in-flight';
    else if (deadScore !== null) own = 'dead';
    else if (position !== null || (await waitsForReader(this.client, keys, id))) own = 'ready';
    // Delivered to groups, and in none of the type's own states but its schedule:
    // in the default group's retries, or held by named groups only.
    else if (delivered !== 1 || (await isScheduled(this.client, keys, id, envelope.dueAt))) own = 'scheduled';

    let groups: Record<string, EventState> | undefined;
    let fromGroup: GroupRead | undefined;
    if (registry.length > 0) {
      groups = {};
      if (registry.includes(DEFAULT_GROUP) && (own || handled !== null)) groups[DEFAULT_GROUP] = own ?? 'handled';
      for (const group of named) {
        const read = delivered === 1 ? await this.groupRead(this.layout.forGroup(keys, group), id) : own === 'scheduled' ? { state: 'scheduled' as const } : undefined;
        if (!read) continue;
        groups[group] = read.state;
        if (!own && !fromGroup && read.state !== 'handled') fromGroup = read;
      }
    }
    if (!own && !fromGroup) {
      const state = (['in-flight', 'ready', 'scheduled', 'dead', 'handled'] as const).find((s) => Object.values(groups ?? {}).includes(s));
      if (!state) return undefined;
      fromGroup = { state };
    }
    const errors = parseErrorLog(fromGroup ? fromGroup.errorLog : errorLog);
    return {
      id,
      state: own ?? fromGroup!.state,
      dueAt: envelope.dueAt,
      attempt: fromGroup?.attempt ?? (leaseScore !== null ? runningAttempt(envelope.attempt, Number(leaseScore)) : envelope.attempt),
      body: envelope.body,
      lastError: (fromGroup ? fromGroup.lastError : lastError) ?? undefined,
      ...(fromGroup?.leaseExpiresAt !== undefined ? { leaseExpiresAt: fromGroup.leaseExpiresAt } : leaseScore !== null ? { leaseExpiresAt: leaseExpiry(Number(leaseScore)) } : {}),
      ...(fromGroup?.deadLetteredAt !== undefined ? { deadLetteredAt: fromGroup.deadLetteredAt } : deadScore !== null ? { deadLetteredAt: Number(deadScore) } : {}),
      ...(errors ? { errors } : {}),
      ...(groups ? { groups } : {}),
    };
  }

  /**
   * Where an event is, in short (since 0.6; a recurring schedule's overlap
   * and pauseOnFailure read its occurrences so): whether any group still
   * holds it scheduled, ready, in flight or waiting, and whether any holds it dead.
   */
  async liveness(keys: TypeKeys, id: string): Promise<{ live: boolean; dead: boolean }> {
    if ((await this.client.hexists(keys.meta, id)) === 0) return { live: false, dead: false };
    const event = await this.read(keys, id);
    const states: string[] = event ? (event.groups ? Object.values(event.groups) : [event.state]) : [];
    return { live: states.some((s) => s !== 'dead' && s !== 'handled'), dead: states.includes('dead') };
  }

  /**
   * One page of the events in `state`: scheduled in due order, ready in
   * dispatch order, in flight by lease expiry, dead oldest first. Across
   * partitions, each partition's first offset + limit are merged.
   */
  async page(queues: readonly TypeKeys[], state: EventState, offset: number, limit: number): Promise<StoredEvent[]> {
    if (state === 'handled') return this.history.page(queues, offset, limit);
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
    // Resumed: every instance's dispatchers look now, quiet ones too (src/runtime/quiet-looks.ts).
    // A refused PUBLISH (an ACL without the channel) leaves them to their next look: the resume itself happened.
    if (!paused) await Promise.all(queues.map((keys) => this.client.publish(this.layout.wakeChannel, `${keys.tag}|0`).catch(() => 0)));
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
    const pipeline = this.client.pipeline().hlen(keys.meta).llen(keys.ready).zcard(keys.inFlight).zscore(keys.inFlight, LEASE_PIN).zcard(keys.dead).lrange(keys.ready, 0, 0);
    if (withFlags) pipeline.hlen(keys.pending).get(keys.paused).hkeys(keys.groups);
    pipeline.exists(keys.newer);
    // Ready events sorted by key (HandlerOptions.key) wait in their keys' lists; the counts of each are kept.
    pipeline.hgetall(keys.keysWaiting);
    // Ready events with a priority wait beside the ready list (lua/includes/priority.lua), the oldest due first in :ra.
    pipeline.zcard(keys.readyByPriority).zrange(keys.readyAging, '0', '0', 'WITHSCORES');
    // Parents waiting for their children (since 0.6) are stored, and in no other state.
    if (withFlags) pipeline.zcard(keys.waiting);
    const replies = (await pipeline.exec()) ?? [];
    const waitingByKey = Object.entries((replies[withFlags ? 10 : 7]?.[1] as Record<string, string> | undefined) ?? {}).filter(([, v]) => Number(v) > 0);
    const sortedByKey = waitingByKey.reduce((n, [, v]) => n + Number(v), 0);
    const parked = Number(replies[withFlags ? 9 : 6]?.[1] ?? 0) > 0 ? (await newerVersions(this.client, keys)).reduce((n, w) => n + w.events, 0) : 0;
    const oldestDue = await oldestReadyDue(
      this.client,
      keys,
      (replies[5]?.[1] as string[] | undefined)?.[0],
      waitingByKey.map(([key]) => key),
    );
    const prioritized = Number(replies[withFlags ? 11 : 8]?.[1] ?? 0);
    const oldestPrioritized = (replies[withFlags ? 12 : 9]?.[1] as string[] | undefined)?.[1];
    const oldestAll = oldestPrioritized === undefined ? oldestDue : Math.min(oldestDue ?? Number.POSITIVE_INFINITY, Number(oldestPrioritized));
    const oldest = oldestAll !== undefined ? { oldestReadyMs: Math.max(0, Date.now() - oldestAll) } : {};
    const [stored = 0, readyListed = 0, inFlightMembers = 0, pinScore = 0, dead = 0, , pending = 0] = [0, 1, 2, 3, 4, 5, 6].map((i) => Number(replies[i]?.[1] ?? 0));
    const ready = readyListed + sortedByKey + prioritized;
    const inFlight = inFlightMembers - (pinScore > 0 ? 1 : 0);
    const groups = withFlags ? ((replies[8]?.[1] as string[] | undefined) ?? []) : [];
    const waiting = withFlags ? Number(replies[13]?.[1] ?? 0) : 0;
    const held = ready + inFlight + dead + parked + waiting;
    const notScheduled = groups.includes(DEFAULT_GROUP) ? Math.max(pending, held) : pending + held;
    return {
      counts: { scheduled: Math.max(0, stored - notScheduled), ready, inFlight, dead, waiting, ...oldest, ...(parked > 0 ? { awaitingNewerVersion: parked } : {}) },
      paused: withFlags && replies[7]?.[1] != null,
      groups,
    };
  }

  /** A named group's state of an event it was delivered: from its own header hash and state keys. */
  private async groupRead(keys: TypeKeys, id: string): Promise<GroupRead | undefined> {
    const [header, lease, dead, position, lastError, errorLog, handled] = pipelineValues(
      await this.client.multi().hget(keys.meta, id).zscore(keys.inFlight, id).zscore(keys.dead, id).lpos(keys.ready, id).hget(keys.errors, id).hget(keys.errorLog, id).hexists(keys.handled, id).exec(),
    ) as [string | null, string | null, string | null, number | null, string | null, string | null, number];
    if (header === null) return handled === 1 ? { state: 'handled' } : undefined;
    const envelope = parseEnvelope(header);
    let state: EventState = lease !== null ? 'in-flight' : dead !== null ? 'dead' : position !== null ? 'ready' : 'scheduled';
    if (state === 'scheduled' && (await waitsForReader(this.client, keys, id))) state = 'ready';
    return {
      state,
      attempt: lease !== null ? runningAttempt(envelope.attempt, Number(lease)) : envelope.attempt,
      lastError,
      errorLog,
      ...(lease !== null ? { leaseExpiresAt: leaseExpiry(Number(lease)) } : {}),
      ...(dead !== null ? { deadLetteredAt: Number(dead) } : {}),
    };
  }

  /** The first `count` entries of a state from position `from`, in its order. */
  private async entries(keys: TypeKeys, state: EventState, from: number, count: number): Promise<Entry[]> {
    switch (state) {
      case 'handled':
        // Paged by handledPage(): never reached.
        return [];
      case 'scheduled':
        return scheduledEntries(this.client, keys, from, count);
      case 'waiting': {
        // By the due time each keeps for when its children are done.
        const flat = await this.client.zrange(keys.waiting, String(from), String(from + count - 1), 'WITHSCORES');
        const entries: Entry[] = [];
        for (let i = 0; i < flat.length; i += 2) entries.push({ id: flat[i]!, key: Number(flat[i + 1]), score: Number(flat[i + 1]) });
        return entries;
      }
      case 'ready': {
        // The ready list first (priority 0), then those with a priority, best first.
        const ids = await this.client.lrange(keys.ready, from, from + count - 1);
        const entries: Entry[] = ids.map((id, i) => ({ id, key: from + i }));
        if (ids.length < count) {
          const listed = await this.client.llen(keys.ready);
          const start = Math.max(0, from - listed);
          const more = await this.client.zrange(keys.readyByPriority, String(start), String(start + count - ids.length - 1));
          entries.push(...more.map((id, i) => ({ id, key: listed + start + i })));
        }
        return entries;
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
}
