import { DEFAULT_GROUP, type RedisLayout, type TypeKeys } from './redis-layout';
import type { RedisClient } from './redis-client';
import type { StoredEvent } from './stored-types';
import { recordOf } from './flow-store';

/** A line a handler logged (delivery.log, since 0.6): when, in which attempt, and the line. */
export interface EventLogLine {
  readonly at: Date;
  readonly attempt: number;
  readonly line: string;
}

/** What an event's calls reported in one group: the progress of its current attempt, and its log. */
export interface CallRecords {
  /** The last progress its current (or last) attempt reported, as JSON parsed (delivery.progress). */
  readonly progress?: unknown;
  /** The lines its calls logged, oldest first, the last 100 (delivery.log). */
  readonly logs?: readonly EventLogLine[];
}

/** find()'s view of what the calls reported (since 0.6): the event's own group's, each named group's, and the result it was handled with. */
export interface ReportedOnEvent extends CallRecords {
  /** Handled (kept by keepHandled): what its call recorded with delivery.result, as JSON parsed. */
  readonly result?: unknown;
  /** Per named group that holds the event, what its calls there reported. */
  readonly groupReports?: Readonly<Record<string, CallRecords>>;
  /** A leading debounce holds a trailing payload until this event settles (since 0.6): when that call is due. */
  readonly trailingDueAt?: Date;
  /** Within a throttle window (since 0.6): until when enqueues of this id answer 'throttled'. */
  readonly throttledUntil?: Date;
  /** A parent of a flow (since 0.6, docs/flows.md): the children it still waits for (pending, or failed under 'fail'). */
  readonly waitingFor?: ReadonlyArray<{ readonly type: string; readonly id: string }>;
}

function parseJson(text: string | null | undefined): unknown {
  if (text === null || text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Progress as stored ('attempt|at|json'): shown only for `attempt`, the event's current one (each attempt starts afresh). */
function progressOf(stored: string | null, attempt: number): unknown {
  if (stored === null) return undefined;
  const [of, , ...json] = stored.split('|');
  return Number(of) === attempt ? parseJson(json.join('|')) : undefined;
}

function logsOf(stored: string | null): readonly EventLogLine[] | undefined {
  const parsed = parseJson(stored);
  if (!Array.isArray(parsed)) return undefined;
  const lines: EventLogLine[] = [];
  for (const entry of parsed) {
    if (Array.isArray(entry) && typeof entry[0] === 'number' && typeof entry[1] === 'number' && typeof entry[2] === 'string') lines.push({ at: new Date(entry[0]), attempt: entry[1], line: entry[2] });
  }
  return lines.length > 0 ? lines : undefined;
}

async function recordsIn(client: RedisClient, keys: TypeKeys, id: string, attempt: number): Promise<CallRecords> {
  const [progress, logs] = await Promise.all([client.hget(keys.progress, id), client.hget(keys.logs, id)]);
  const shown = progressOf(progress, attempt);
  const lines = logsOf(logs);
  return { ...(shown !== undefined ? { progress: shown } : {}), ...(lines ? { logs: lines } : {}) };
}

/** What the calls of a stored (or handled) event reported, as find() shows it. */
export async function reportedOn(client: RedisClient, layout: RedisLayout, keys: TypeKeys, stored: StoredEvent): Promise<ReportedOnEvent> {
  const own = stored.state === 'handled' ? {} : await recordsIn(client, keys, stored.id, stored.attempt);
  const result = stored.state === 'handled' ? parseJson(await client.hget(keys.handledResults, stored.id)) : undefined;
  const groupReports: Record<string, CallRecords> = {};
  for (const [group, state] of Object.entries(stored.groups ?? {})) {
    if (group === DEFAULT_GROUP || state === 'handled') continue;
    const groupKeys = layout.forGroup(keys, group);
    const header = await client.hget(groupKeys.meta, stored.id);
    const attempt = Number(header?.split('|')[0] ?? 0) + (state === 'in-flight' ? 1 : 0);
    const records = await recordsIn(client, groupKeys, stored.id, attempt);
    if (records.progress !== undefined || records.logs) groupReports[group] = records;
  }
  const windows = await windowsOn(client, keys, stored.id);
  const flow = stored.state === 'handled' ? undefined : recordOf(await client.hget(keys.flows, stored.id));
  const waitingFor = flow?.edges.filter((e) => e.state !== 'done').map((e) => e.child);
  return { ...own, ...(result !== undefined ? { result } : {}), ...(Object.keys(groupReports).length > 0 ? { groupReports } : {}), ...windows, ...(waitingFor ? { waitingFor } : {}) };
}

/** The id's windows (lua/includes/enqueue-policy.lua): a trailing payload held, a throttle window still open. */
async function windowsOn(client: RedisClient, keys: TypeKeys, id: string): Promise<Pick<ReportedOnEvent, 'trailingDueAt' | 'throttledUntil'>> {
  const [burst, throttle, [seconds, micros]] = await Promise.all([client.hget(keys.bursts, id), client.zscore(keys.throttles, id), client.time()]);
  const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  // '<quiet end>|<burst start>|<max wait>|<held due>|<held body>'
  const [, , , heldDue, ...held] = (burst ?? '').split('|');
  const until = throttle === null ? 0 : Number(throttle);
  return { ...(heldDue && held.join('|') !== '' ? { trailingDueAt: new Date(Number(heldDue)) } : {}), ...(until > now ? { throttledUntil: new Date(until) } : {}) };
}
