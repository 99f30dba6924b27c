import { limitUse } from './flow-limits';
import type { RedisClient } from './redis-client';
import { DEFAULT_GROUP, type RedisLayout, type TypeKeys } from './redis-layout';
import type { EventState, StoredEvent } from './stored-types';
import { recordOf } from './flow-store';

/**
 * What holds an event back (since 0.6): `not-due` (scheduled), `paused` (the
 * type is paused), `rate-limit` (a rate limit's window is full, or a handler
 * said its provider rate-limited it), `concurrency` (as many calls run as the
 * limit allows), `key-turn` (it waits for its key's turn or room under its
 * key's limits), `newer-version` (written by a class version no running reader
 * reads), `ready` (nothing: it starts when a handler has a free slot),
 * `in-flight` (it runs), `dead` (dead-lettered), `handled` (it ran; kept by
 * keepHandled).
 */
export type ExplanationGate = 'not-due' | 'paused' | 'rate-limit' | 'concurrency' | 'key-turn' | 'newer-version' | 'ready' | 'in-flight' | 'dead' | 'handled' | 'children';

/** Why one group's delivery of an event has not run (or what it is doing), as explain() answers. */
export interface GroupExplanation {
  readonly group: string;
  readonly state: EventState;
  readonly gate: ExplanationGate;
  /** When the gate opens (or the lease ends), when known. */
  readonly until?: Date;
  /** The figures behind it, for programs: e.g. `{ started: 20, max: 20, perMs: 1000 }`. */
  readonly detail: Readonly<Record<string, number | string>>;
  /** A sentence for people. */
  readonly text: string;
}

/** explain()'s answer: the event's first group's explanation (the default group's, when it has one), and every group's. */
export interface Explanation extends GroupExplanation {
  readonly id: string;
  readonly type: string;
  readonly groups: readonly GroupExplanation[];
}

const clock = (ms: number) => new Date(ms).toISOString().slice(11, 23);

/** Why `stored` (in queue `keys`) waits, in each group that holds it. */
export async function explainStored(client: RedisClient, layout: RedisLayout, keys: TypeKeys, stored: StoredEvent): Promise<GroupExplanation[]> {
  const [time, paused] = await Promise.all([client.time(), client.exists(keys.paused)]);
  const now = Number(time[0]) * 1_000 + Math.floor(Number(time[1]) / 1_000);
  const groups = stored.groups ? Object.entries(stored.groups) : [[DEFAULT_GROUP, stored.state] as const];
  const out: GroupExplanation[] = [];
  for (const [group, state] of groups) out.push(await explainGroup(client, layout.forGroup(keys, group), stored, group, state, now, paused === 1));
  return out;
}

async function explainGroup(client: RedisClient, keys: TypeKeys, stored: StoredEvent, group: string, state: EventState, now: number, paused: boolean): Promise<GroupExplanation> {
  const base = { group, state };
  const id = stored.id;
  switch (state) {
    case 'handled':
      return { ...base, gate: 'handled', detail: { attempt: stored.attempt }, text: `handled on attempt ${stored.attempt}${stored.handledAt ? ` at ${clock(stored.handledAt)}` : ''}` };
    case 'dead':
      return {
        ...base,
        gate: 'dead',
        detail: { attempt: stored.attempt, ...(stored.lastError ? { error: stored.lastError } : {}) },
        text: `dead-lettered after attempt ${stored.attempt}${stored.lastError ? `: ${stored.lastError}` : ''}; replayDeadLetters() runs it again`,
      };
    case 'in-flight': {
      const until = stored.leaseExpiresAt;
      return {
        ...base,
        gate: 'in-flight',
        ...(until !== undefined ? { until: new Date(until) } : {}),
        detail: { attempt: stored.attempt },
        text: `running attempt ${stored.attempt}${until !== undefined ? `; its lease ends at ${clock(until)} at the latest, sooner if its instance stops renewing it` : ''}`,
      };
    }
    case 'waiting': {
      // A flow's parent (since 0.6): its children left, read from its flow record.
      const left = (recordOf(await client.hget(keys.flows, id))?.edges ?? []).filter((e) => e.state !== 'done').map((e) => `${e.child.type} ${e.child.id}`);
      return {
        ...base,
        gate: 'children',
        detail: { children: left.length },
        text: `waiting for ${left.length} ${left.length === 1 ? 'child' : 'children'} (${left.slice(0, 5).join(', ')}${left.length > 5 ? ', …' : ''}); due once each is done`,
      };
    }
    case 'scheduled': {
      const header = group === DEFAULT_GROUP ? undefined : await client.hget(keys.meta, id);
      const due = header ? Number(header.split('|')[1]) : stored.dueAt;
      if (due > now) return { ...base, gate: 'not-due', until: new Date(due), detail: { dueInMs: due - now }, text: `not due until ${clock(due)} (in ${Math.ceil((due - now) / 1000)} s)` };
      if (paused) return { ...base, gate: 'paused', detail: {}, text: 'due, but the type is paused: nothing is moved or claimed until resume()' };
      return {
        ...base,
        gate: 'not-due',
        until: new Date(due),
        detail: { dueInMs: 0 },
        text: `due since ${clock(due)}; a dispatcher of an instance handling the type moves it to READY at its next look`,
      };
    }
    default:
      return explainReady(client, keys, id, base, now, paused);
  }
}

async function explainReady(client: RedisClient, keys: TypeKeys, id: string, base: { group: string; state: EventState }, now: number, paused: boolean): Promise<GroupExplanation> {
  if (paused) return { ...base, gate: 'paused', detail: {}, text: 'ready, but the type is paused: nothing is claimed until resume()' };
  const [position, key, versions] = await Promise.all([client.lpos(keys.ready, id), client.hget(keys.keyedIds, id), client.hkeys(keys.newer)]);
  for (const version of versions) {
    if ((await client.lpos(`${keys.newer}:${version}`, id)) !== null) {
      return {
        ...base,
        gate: 'newer-version',
        detail: { version: Number(version) },
        text: `written by class version ${version}: it waits for a reader of that version or newer (no instance running one has claimed it)`,
      };
    }
  }
  const use = await limitUse(client, keys);
  if (use.heldForMs !== undefined) {
    const until = now + use.heldForMs;
    return {
      ...base,
      gate: 'rate-limit',
      until: new Date(until),
      detail: { heldForMs: use.heldForMs },
      text: `held by a rate limit until ${clock(until)}: a handler said its provider rate-limited it`,
    };
  }
  if (use.pausedForMoveMs !== undefined) {
    const until = now + use.pausedForMoveMs;
    return {
      ...base,
      gate: 'concurrency',
      until: new Date(until),
      detail: { pausedForMoveMs: use.pausedForMoveMs },
      text: `held until ${clock(until)} at most while the type's partitions change, so that its limits hold across both settings`,
    };
  }
  if (use.rate && (use.started ?? 0) >= use.rate.max) {
    const oldest = await client.zrange(keys.rateWindow, `(${now - use.rate.perMs}`, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES');
    const until = oldest[1] !== undefined ? Number(oldest[1]) + use.rate.perMs : now + use.rate.perMs;
    const per = use.rate.perMs === 1000 ? 'second' : `${use.rate.perMs} ms`;
    return {
      ...base,
      gate: 'rate-limit',
      until: new Date(until),
      detail: { started: use.started ?? 0, max: use.rate.max, perMs: use.rate.perMs },
      text: `held by a rate limit until ${clock(until)}; ${use.started} of ${use.rate.max} calls started in the last ${per}`,
    };
  }
  if (use.concurrency !== undefined && use.running >= use.concurrency) {
    return {
      ...base,
      gate: 'concurrency',
      detail: { running: use.running, max: use.concurrency },
      text: `${use.running} of ${use.concurrency} calls run (globalConcurrency): it starts when one ends`,
    };
  }
  if (key !== null) {
    const [running, waiting, keys_] = await Promise.all([client.zcount(`${keys.keyRunning}${key}`, `(${now}`, '+inf'), client.lpos(`${keys.keyedList}${key}`, id), client.llen(keys.keyRing)]);
    const rate = use.perKey?.rate;
    const started = rate ? await client.zcount(`${keys.keyRate}${key}`, `(${now - rate.perMs}`, '+inf') : 0;
    if (rate && started >= rate.max) {
      const oldest = await client.zrange(`${keys.keyRate}${key}`, `(${now - rate.perMs}`, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES');
      const until = oldest[1] !== undefined ? Number(oldest[1]) + rate.perMs : now + rate.perMs;
      return {
        ...base,
        gate: 'key-turn',
        until: new Date(until),
        detail: { key, started, max: rate.max, perMs: rate.perMs },
        text: `waits for its key '${key}' until ${clock(until)}: ${started} of ${rate.max} of its calls started in the last ${rate.perMs} ms`,
      };
    }
    const limit = use.perKey?.concurrency;
    const text =
      limit !== undefined && running >= limit
        ? `waits for its key '${key}': ${running} of ${limit} of its calls run`
        : `waits its key's turn: key '${key}' is one of ${keys_} keys served in turn${waiting !== null ? `, ${waiting} of its events before it` : ''}`;
    return { ...base, gate: 'key-turn', detail: { key, running, ...(limit !== undefined ? { max: limit } : {}), keys: keys_ }, text };
  }
  // With a priority it waits in the priority set, after the ready list (lua/includes/claim/take-ready.lua).
  const rank = position === null ? await client.zrank(keys.readyByPriority, id) : null;
  const before = position ?? (rank !== null ? (await client.llen(keys.ready)) + rank : 0);
  return { ...base, gate: 'ready', detail: { before }, text: `ready${before > 0 ? `, ${before} events before it` : ', first in line'}: it starts when a handler of the type has a free slot` };
}
