import type { IncomingMessage } from 'node:http';
import {
  DELAY_TEXT_HELP,
  type Delay,
  DelayedEventError,
  type Inspector,
  type EventState,
  type EventTypeInfo,
  InvalidArgumentError,
  InvalidDelayError,
  RedisCallTimeoutError,
  RedisConnectionError,
  type StateCounts,
  TypeInUseError,
  parseDelayText,
} from '../index';
import { HttpError, readJsonBody } from './http-io';

/**
 * What the dashboard uses of a service: the public inspection and control
 * API, nothing below it. Every call names types by their string, so the
 * dashboard needs none of the application's event classes.
 */
export type DashboardSource = Pick<
  Inspector,
  | 'prefix'
  | 'types'
  | 'counts'
  | 'find'
  | 'explain'
  | 'list'
  | 'reschedule'
  | 'runNow'
  | 'cancel'
  | 'pause'
  | 'resume'
  | 'replayDeadLetters'
  | 'purgeDeadLetters'
  | 'drain'
  | 'clean'
  | 'obliterate'
  | 'schedules'
  | 'unschedule'
  | 'pauseSchedule'
  | 'resumeSchedule'
  | 'dueTimeline'
  | 'activity'
  | 'health'
  | 'instances'
  | 'limits'
>;

/** The states the API pages through, and the most ids or events one request takes (the Inspector's page limit). */
const EVENT_STATES: readonly EventState[] = ['scheduled', 'ready', 'in-flight', 'dead', 'handled', 'waiting'];
const MAX_PAGE = 1_000;

/** A type as the overview shows it. */
export interface TypeOverview extends EventTypeInfo {
  readonly counts: StateCounts & { readonly groups?: Readonly<Record<string, StateCounts>> };
}

export interface Overview {
  readonly prefix: string;
  readonly at: string;
  readonly readOnly: boolean;
  readonly types: readonly TypeOverview[];
}

type Query = URLSearchParams;
type Route = (source: DashboardSource, params: { type: string; rest: string[]; query: Query; req: IncomingMessage }) => Promise<unknown>;

const EMPTY_COUNTS: StateCounts = { scheduled: 0, ready: 0, inFlight: 0, dead: 0, waiting: 0 };
const ID_MAX = 1_000;

export async function readOverview(source: DashboardSource, readOnly: boolean): Promise<Overview> {
  const types = await source.types();
  const counted = await Promise.all(types.map(async (info) => ({ ...info, counts: (await source.counts(info.type)) ?? EMPTY_COUNTS })));
  return { prefix: source.prefix, at: new Date().toISOString(), readOnly, types: counted };
}

function badRequest(code: string, message: string): HttpError {
  return new HttpError(400, code, message);
}

function id(text: string | undefined): string {
  if (text === undefined || text.length === 0 || text.length > ID_MAX) throw badRequest('bad-id', `an event id is 1-${ID_MAX} characters`);
  return text;
}

function state(text: string | null): EventState {
  const value = (text ?? 'scheduled') as EventState;
  if (!EVENT_STATES.includes(value)) throw badRequest('bad-state', `state must be one of ${EVENT_STATES.join(', ')}`);
  return value;
}

/** Checked by the service too; here so that a bad one is refused before anything is read. */
const GROUP_NAME = /^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,64}$/;

function group(text: unknown): string | undefined {
  if (text === undefined || text === null || text === '') return undefined;
  if (typeof text !== 'string' || !GROUP_NAME.test(text)) throw badRequest('bad-group', "a group name is 1-64 letters, digits, '_', '.' or '-', not '.' or '..'");
  return text;
}

function whole(name: string, text: string | null, fallback: number, min: number, max: number): number {
  if (text === null || text === '') return fallback;
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) throw badRequest(`bad-${name}`, `${name} must be a whole number from ${min} to ${max}`);
  return Number(text);
}

/** A duration as text (`15m`, `1h`) or milliseconds, within bounds. */
function span(name: string, text: string | null, fallback: number, min: number, max: number): number {
  if (text === null || text === '') return fallback;
  const parsed = /^\d+$/.test(text) ? Number(text) : parseDelayText(text);
  if (typeof parsed !== 'number' || parsed < min || parsed > max) throw badRequest(`bad-${name}`, `${name} must be a duration from ${min} ms to ${max} ms, such as 15m or 1h`);
  return parsed;
}

function delay(value: unknown): Delay | Date {
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value;
  const parsed = typeof value === 'string' ? parseDelayText(value) : undefined;
  if (parsed === undefined) throw badRequest('bad-delay', `delay must be ${DELAY_TEXT_HELP}`);
  return parsed;
}

/** `{ ids: [...] }` or `{ all: true }`: never an empty body meaning everything. */
function selection(body: Record<string, unknown>): readonly string[] | undefined {
  if (body.all === true && body.ids === undefined) return undefined;
  const ids = body.ids;
  if (Array.isArray(ids) && ids.length > 0 && ids.length <= MAX_PAGE && ids.every((x) => typeof x === 'string' && x.length > 0 && x.length <= ID_MAX)) return ids as string[];
  throw badRequest('bad-selection', `send { "ids": [...] } (1-${MAX_PAGE} ids) or { "all": true }`);
}

function found<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new HttpError(404, 'not-found', what);
  return value;
}

function changed(done: boolean, what: string): { ok: true } {
  if (!done) throw new HttpError(409, 'not-changed', what);
  return { ok: true };
}

const READS: Record<string, Route> = {
  events: async (source, { type, rest, query }) => {
    if (rest.length === 1) {
      // With why it waits (since 0.6), read beside it.
      const [event, explanation] = await Promise.all([source.find(type, id(rest[0])), source.explain(type, id(rest[0]))]);
      return found(event && { ...event, ...(explanation ? { explanation } : {}) }, `no event ${JSON.stringify(rest[0])} of type ${type}`);
    }
    if (rest.length > 1) throw new HttpError(404, 'no-route', 'no such path');
    const searched = query.get('id');
    if (searched) {
      const event = await source.find(type, id(searched));
      return { events: event ? [event] : [] };
    }
    return {
      events: await source.list(type, state(query.get('state')), {
        offset: whole('offset', query.get('offset'), 0, 0, Number.MAX_SAFE_INTEGER),
        limit: whole('limit', query.get('limit'), 50, 1, MAX_PAGE),
        group: group(query.get('group')),
      }),
    };
  },
  timeline: async (source, { type, query }) =>
    found(
      await source.dueTimeline(type, {
        horizonMs: span('horizon', query.get('horizon'), 3_600_000, 1_000, 30 * 86_400_000),
        slots: whole('slots', query.get('slots'), 60, 1, 500),
        group: group(query.get('group')),
      }),
      `nothing is stored for type ${type}`,
    ),
  activity: async (source, { type, query }) => ({ slots: await source.activity(type, span('window', query.get('window'), 900_000, 10_000, 3_600_000)) }),
  schedules: async (source, { type }) => ({ schedules: await source.schedules(type) }),
  limits: async (source, { type }) => ({ limits: (await source.limits(type)) ?? {} }),
};

const ACTIONS: Record<string, Route> = {
  pause: async (source, { type }) => changed(await source.pause(type), `nothing is stored for type ${type}`),
  resume: async (source, { type }) => changed(await source.resume(type), `nothing is stored for type ${type}`),
  'events/cancel': async (source, { type, rest }) => changed(await source.cancel(type, id(rest[0])), `event ${rest[0]} is not stored`),
  'events/run-now': async (source, { type, rest }) => changed(await source.runNow(type, id(rest[0])), `event ${rest[0]} is not scheduled or ready`),
  'events/reschedule': async (source, { type, rest, req }) => {
    const body = await readJsonBody(req);
    return changed(await source.reschedule(type, id(rest[0]), delay(body.delay)), `event ${rest[0]} is not scheduled or ready`);
  },
  'dead-letters/replay': async (source, { type, req }) => onDeadLetters(source, type, await readJsonBody(req), 'replay'),
  'dead-letters/purge': async (source, { type, req }) => onDeadLetters(source, type, await readJsonBody(req), 'purge'),
  'schedules/unschedule': async (source, { type, rest }) => changed(await source.unschedule(type, found(rest[0], 'name the schedule')), `no schedule ${rest[0]}`),
  'schedules/pause': async (source, { type, rest }) => changed(await source.pauseSchedule(type, found(rest[0], 'name the schedule')), `no schedule ${rest[0]}`),
  'schedules/resume': async (source, { type, rest }) => changed(await source.resumeSchedule(type, found(rest[0], 'name the schedule')), `no schedule ${rest[0]}`),
  // The bulk clean-up (since 0.6); the page asks before each.
  drain: async (source, { type, req }) => {
    const named = group((await readJsonBody(req)).group);
    return { count: await source.drain(type, named ? { group: named } : {}) };
  },
  clean: async (source, { type, req }) => {
    const body = await readJsonBody(req);
    const state = body.state ?? 'dead';
    if (state !== 'dead' && state !== 'handled') throw badRequest('bad-state', 'state is dead or handled');
    const olderThan = typeof body.olderThan === 'number' ? String(body.olderThan) : typeof body.olderThan === 'string' ? body.olderThan : null;
    if (olderThan === null || olderThan === '') throw badRequest('bad-olderThan', 'olderThan is required: a duration such as 7d, or 0 for all');
    const limit = body.limit === undefined ? undefined : whole('limit', String(body.limit), 1, 1, Number.MAX_SAFE_INTEGER);
    const named = group(body.group);
    const olderThanMs = span('olderThan', olderThan, 0, 0, 100 * 365 * 86_400_000);
    return { count: await source.clean(type, state, { olderThanMs, ...(limit ? { limit } : {}), ...(named ? { group: named } : {}) }) };
  },
  obliterate: async (source, { type, req }) => {
    const force = (await readJsonBody(req)).force === true;
    try {
      return { obliterated: await source.obliterate(type, { force }) };
    } catch (error) {
      if (error instanceof TypeInUseError) throw new HttpError(409, 'type-in-use', error.message);
      throw error;
    }
  },
};

/**
 * Replays or purges dead letters: of the group the body names, or, without
 * one, of every group of the type (an event page of a group's dead letter
 * needs no group to act on it). Nothing done is 409 not-changed: the page
 * must never show success for nothing done.
 */
async function onDeadLetters(source: DashboardSource, type: string, body: Record<string, unknown>, action: 'replay' | 'purge'): Promise<{ count: number; groups?: Record<string, number> }> {
  const ids = selection(body);
  const named = group(body.group);
  const counts = await source.counts(type);
  const groups = named ? [named] : ['default', ...Object.keys(counts?.groups ?? {}).filter((g) => g !== 'default')];
  const done: Record<string, number> = {};
  for (const g of groups) done[g] = action === 'replay' ? await source.replayDeadLetters(type, ids, { group: g }) : await source.purgeDeadLetters(type, ids, { group: g });
  const count = Object.values(done).reduce((a, b) => a + b, 0);
  if (count === 0)
    throw new HttpError(
      409,
      'not-changed',
      `no dead letter ${ids ? `among ${ids.join(', ')}` : ''} of type ${type}${named ? ` in group ${named}` : ''}: nothing was ${action === 'replay' ? 'replayed' : 'purged'}`,
    );
  // Per group only where named groups are involved: a type of the default group alone answers { count } as it always did.
  return groups.some((g) => g !== 'default') ? { count, groups: done } : { count };
}

/**
 * Routes `/types/<type>/...` (path already split, decoded) to a read or an
 * action. The type must exist: a name nothing is stored under is bad input,
 * answered before anything is called.
 */
export async function typeRoute(source: DashboardSource, method: string, segments: string[], query: Query, req: IncomingMessage): Promise<unknown> {
  const [type, section, ...rest] = segments;
  if (type === undefined || section === undefined) throw new HttpError(404, 'no-route', 'no such path');
  let route: Route | undefined;
  let args = rest;
  if (method === 'GET') route = READS[section];
  else if (method === 'POST') {
    // Actions on one thing name it before the verb: events/<id>/cancel, schedules/<name>/unschedule.
    const verb = rest.length > 0 ? `${section}/${rest[rest.length - 1]}` : section;
    route = ACTIONS[verb];
    args = rest.slice(0, -1);
    if (route && (section === 'events' || section === 'schedules') && args.length !== 1) route = undefined;
  }
  if (!route) throw new HttpError(method === 'GET' || method === 'POST' ? 404 : 405, 'no-route', `no ${method} ${segments.join('/')}`);
  try {
    // A type with recurring schedules and nothing stored yet is a type in use too.
    if ((await source.counts(type)) === undefined && (await source.schedules(type)).length === 0) {
      throw badRequest('unknown-type', `no event type ${JSON.stringify(type)} under prefix '${source.prefix}'`);
    }
    return await route(source, { type, rest: args, query, req });
  } catch (error) {
    throw asHttpError(error);
  }
}

/**
 * The service's errors as the status a client can act on. Bad input is
 * checked before anything is read, so what else fails is Redis (refused,
 * timed out, closed, a reply error): 503, worth trying again.
 */
export function asHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof InvalidArgumentError || error instanceof InvalidDelayError) return badRequest('bad-argument', error.message);
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof RedisConnectionError || error instanceof RedisCallTimeoutError || !(error instanceof DelayedEventError)) return new HttpError(503, 'redis-unavailable', message);
  return new HttpError(500, 'internal', message);
}
