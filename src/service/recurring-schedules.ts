import { whenReady } from '../redis/ready-gate';
import { randomBytes } from 'node:crypto';
import type { DelayedEventInstance, EventRoute } from '../core/delayed-event.decorator';
import { InvalidOptionError } from '../core/errors';
import { type AllowedKeys, checkArgumentKeys } from '../core/option-keys';
import type { EventCodec } from '../core/event-codec';
import type { EventContext } from '../core/event-context';
import { splitBodyVersion, versionedBody } from '../core/stored-body';
import { type CatchUp, MAX_CATCH_UP, type RecurrenceSpec, type StoredSpec, type Window, checkSpec, checkWindow, occurrenceAtOrAfter } from '../core/recurrence';
import type { LuaScripts } from '../redis/lua-scripts';
import type { RedisClient } from '../redis/redis-client';
import { RecurringStore, type ScheduleDefinition } from '../redis/recurring-store';
import type { RedisLayout } from '../redis/redis-layout';
import { METRIC, type Metrics } from '../runtime/metrics';
import { OutageBackoff, sleep } from '../runtime/outage-backoff';
import { Wakeup } from '../runtime/wakeup';
import { type BackgroundService, LoopService } from '../runtime/background-service';

export interface ScheduleOptions {
  /** Context every occurrence carries. */
  readonly context?: EventContext;
  /** No occurrence before this; with `every`, the first occurrence (default: one interval from now). */
  readonly startAt?: Date;
  /** No occurrence after this. */
  readonly endAt?: Date;
  /** Occurrences missed while no instance ran: 'none', only the 'latest' (default), or 'all' (the latest 100). */
  readonly catchUp?: CatchUp;
}

/** schedule()'s options, each once (src/core/option-keys.ts). */
const SCHEDULE_OPTION_KEYS = { context: true, startAt: true, endAt: true, catchUp: true } as const satisfies AllowedKeys<ScheduleOptions>;
/** A spec is { every } or { cron, tz? }: checkSpec says which mixes are wrong. */
const SPEC_KEYS = { every: true, cron: true, tz: true } as const;

/** schedule()'s spec and options hold only keys it knows: an InvalidArgumentError names one it does not, before anything waits for Redis. */
export function checkScheduleKeys(spec: unknown, options: unknown): void {
  if (spec !== null && typeof spec === 'object') checkArgumentKeys(spec, SPEC_KEYS, 'a schedule spec');
  checkArgumentKeys(options, SCHEDULE_OPTION_KEYS, 'schedule');
}

/** A recurring schedule as `schedules()` lists it. */
export interface RecurringSchedule {
  /** The event type its occurrences are. */
  readonly type: string;
  readonly name: string;
  readonly spec: StoredSpec;
  /** The next occurrence not enqueued yet; undefined once the schedule has ended. */
  readonly next: Date | undefined;
  readonly startAt: Date | undefined;
  readonly endAt: Date | undefined;
  readonly catchUp: CatchUp;
  readonly context: EventContext;
  /** The latest occurrence enqueued (due then); undefined before the first. */
  readonly last: Date | undefined;
}

/** Schedule names end up in event ids (`<name>@<ms>`) and keys: no '@' or key separators. */
const SCHEDULE_NAME = /^[^\s@{}|#]{1,100}$/;

/** One occurrence to store: an ordinary event of the schedule's type. */
export interface Occurrence {
  readonly route: EventRoute;
  readonly id: string;
  readonly body: string;
  readonly at: number;
}

export interface RecurringSettings {
  /** How often the loop looks at every schedule, at most. */
  readonly pollIntervalMs: number;
  /** Stores occurrences: idempotently (an id stored or handled lately is a duplicate), or replacing what is stored. */
  readonly store: (occurrences: readonly Occurrence[], replace: boolean) => Promise<void>;
  /** Cancels an occurrence enqueued ahead when its schedule is replaced or removed. */
  readonly cancel: (route: EventRoute, id: string) => Promise<boolean>;
  /** Redis lost the schedules this instance defined; they are being stored again. */
  readonly onLost: (type: string, names: readonly string[]) => void;
}

/** A schedule this instance defined, kept to store it again if Redis loses it. */
interface DefinedHere {
  readonly name: string;
  readonly template: DelayedEventInstance;
  readonly spec: RecurrenceSpec;
  readonly options: ScheduleOptions;
}

/** The id of a schedule's occurrence: deterministic, so every instance that enqueues it enqueues the same event. */
export function occurrenceId(name: string, at: number): string {
  return `${name}@${at}`;
}

/**
 * Advances every recurring schedule under the prefix. Any instance may: each
 * occurrence is enqueued with its deterministic id (a second enqueue is a
 * duplicate), ahead of its time by up to a poll interval so it is delivered
 * as precisely as any delayed event, and the schedule's next occurrence moves
 * on with a compare-and-set, so of several instances one advances it.
 * Occurrences more than two poll intervals past when first seen were missed
 * (no instance ran): `catchUp` says which of them still run.
 */
export class RecurringSchedules implements BackgroundService {
  private readonly wakeup = new Wakeup();
  private readonly lifecycle = new LoopService((signal) => this.loop(signal));
  /** Per type (its route as JSON), the schedules defined here, by name, and the marker value seen when they were stored. */
  private readonly definedHere = new Map<string, { readonly route: EventRoute; readonly schedules: Map<string, DefinedHere>; marker: string | null }>();

  private readonly store: RecurringStore;

  constructor(
    private readonly client: RedisClient,
    private readonly scripts: LuaScripts,
    private readonly layout: RedisLayout,
    private readonly codec: EventCodec,
    private readonly metrics: Metrics,
    private readonly settings: RecurringSettings,
  ) {
    this.store = new RecurringStore(client, layout, (name, work) => scripts.bounded(name, work));
  }

  /**
   * Validates a schedule at the call (a typed error says what to fix; nothing is
   * stored) and stores it, replacing one of the same class and name.
   */
  async define<T extends DelayedEventInstance>(name: string, template: T, spec: RecurrenceSpec, options: ScheduleOptions): Promise<void> {
    if (typeof name !== 'string' || !SCHEDULE_NAME.test(name)) {
      throw new InvalidOptionError('name', `must be 1-100 characters without '@', braces, '|', '#' or whitespace; got ${JSON.stringify(name)}`);
    }
    const stored = checkSpec(spec);
    const window = checkWindow(options.startAt, options.endAt, Date.now());
    const catchUp = options.catchUp ?? 'latest';
    if (!['none', 'latest', 'all'].includes(catchUp)) throw new InvalidOptionError('catchUp', `must be 'none', 'latest' or 'all', got ${JSON.stringify(catchUp)}`);
    // Encoded once as an occurrence would be: the codec's checks (size, keys it would drop) apply now.
    const probe = Object.assign(Object.create(Object.getPrototypeOf(template) as object) as T, template, { id: occurrenceId(name, 0) });
    const encoded = this.codec.encode(probe, options.context, Date.now());
    const [, payload, context] = JSON.parse(splitBodyVersion(encoded.body).json) as [number, Record<string, unknown>, EventContext | undefined];
    const now = Date.now();
    const anchor = window.startAt ?? ('every' in stored ? now + stored.every : now);
    const next = occurrenceAtOrAfter(stored, window, anchor, Math.max(now, window.startAt ?? now));
    const marker = await this.save({
      name,
      type: encoded.type,
      partitions: encoded.route.partitions,
      spec: stored,
      window,
      catchUp,
      anchor,
      payload,
      ...(encoded.version > 1 ? { eventVersion: encoded.version } : {}),
      ...(context ? { context } : {}),
      next: next ?? null,
      ahead: [],
      version: randomBytes(8).toString('hex'),
    });
    // Kept once stored, so the loop never takes a schedule still being saved for one Redis lost.
    const routeKey = JSON.stringify(encoded.route);
    let here = this.definedHere.get(routeKey);
    if (!here) this.definedHere.set(routeKey, (here = { route: encoded.route, schedules: new Map(), marker }));
    here.schedules.set(name, { name, template, spec, options });
    here.marker = marker;
  }

  /** Each schedule of a type as `schedules()` shows it. */
  describe(route: EventRoute): Promise<RecurringSchedule[]> {
    return describeSchedules(this.store, route);
  }

  /**
   * Stores (or replaces) a schedule, reading the previous definition in the same
   * transaction, and settles what that one had enqueued ahead. Storing the same
   * schedule again (every replica of an app does at boot) changes nothing: the
   * schedule keeps its anchor and next occurrence.
   */
  private async save(definition: ScheduleDefinition): Promise<string | null> {
    const route = { type: definition.type, partitions: definition.partitions };
    const current = await this.store.read(route, definition.name);
    // Stored already (by another replica, or before markers existed): the marker is set if missing, and read.
    if (current && sameSchedule(current.definition, definition)) return this.store.ensureMarker(route);
    const { previous, marker } = await this.store.write(definition);
    if (previous) await this.settleAhead(previous.definition, definition);
    this.wakeup.wake();
    return marker;
  }

  /** Removes a schedule, reading it in the same transaction; resolves whether it existed. */
  async remove(route: EventRoute, name: string): Promise<boolean> {
    this.definedHere.get(JSON.stringify(route))?.schedules.delete(name);
    return removeSchedule(this.store, route, name, this.settings.cancel);
  }

  /** The route of a type that has schedules, by name (for tools without the event classes); undefined when it has none. */
  routeOf(type: string): Promise<EventRoute | undefined> {
    return this.store.routeOf(type);
  }

  start(): void {
    this.lifecycle.start();
  }

  stop(): Promise<void> {
    return this.lifecycle.stop();
  }

  /**
   * The loop, until `signal` aborts (LoopService): stopped, a tick sends
   * nothing more, though a schedule it began advancing is finished first
   * (its occurrences enqueued, its next occurrence moved on), so no
   * definition is left half-settled.
   */
  private async loop(signal: AbortSignal): Promise<void> {
    const onAbort = () => this.wakeup.wake();
    signal.addEventListener('abort', onAbort, { once: true });
    const backoff = new OutageBackoff();
    while (!signal.aborted) {
      this.wakeup.clear();
      try {
        // The command connection keeps no offline queue: wait for it (at start-up, after an outage).
        await whenReady(this.client);
        await this.restoreDefinedHere(signal);
        await this.advanceAll(signal);
        backoff.reset();
        await this.wakeup.wait(this.settings.pollIntervalMs);
      } catch {
        if (signal.aborted) break;
        this.metrics.count(METRIC.redisErrors, { loop: 'recurring', type: '' });
        await sleep(backoff.next(), signal);
      }
    }
    signal.removeEventListener('abort', onAbort);
  }

  /**
   * Stores again the schedules defined here whose queue lost its marker: Redis
   * lost them (restarted empty, flushed, failed over to an empty replica).
   * One removed by another instance (the marker is there, the schedule not)
   * is forgotten here instead.
   */
  private async restoreDefinedHere(signal: AbortSignal): Promise<void> {
    for (const here of this.definedHere.values()) {
      const { route, schedules } = here;
      if (schedules.size === 0 || signal.aborted) continue;
      const { marker, names: stored, obliterated } = await this.store.markerAndNames(route);
      if (obliterated) {
        // obliterate() removed them on purpose: they are forgotten here, not stored again.
        schedules.clear();
        continue;
      }
      if (marker !== null && marker === here.marker) {
        // The same Redis data as when they were stored: one gone was removed on purpose.
        for (const name of [...schedules.keys()]) if (!stored.includes(name)) schedules.delete(name);
        continue;
      }
      // Gone, or set anew by another instance that noticed first: what was stored here is gone.
      this.settings.onLost(route.type, [...schedules.keys()]);
      for (const s of [...schedules.values()]) await this.define(s.name, s.template, s.spec, s.options);
    }
  }

  private async advanceAll(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    for (const route of await this.store.routes()) {
      if (signal.aborted) return;
      for (const { json, definition } of await this.store.readAll(route)) {
        if (signal.aborted) return;
        await this.advance(json, definition);
      }
    }
  }

  /** Enqueues what is due within the next poll interval (and what catch-up keeps), then moves `next` on. */
  private async advance(json: string, definition: ScheduleDefinition): Promise<void> {
    if (definition.next === null) return;
    const now = Date.now();
    const horizon = now + this.settings.pollIntervalMs;
    const missedBefore = now - 2 * this.settings.pollIntervalMs;
    const { spec, window, anchor } = definition;
    let missed: number[] = [];
    const timely: number[] = [];
    let next: number | undefined = definition.next;
    if (next < missedBefore && 'every' in spec) {
      // After an outage an interval schedule jumps: the missed occurrences it may
      // still run are the last MAX_CATCH_UP before missedBefore, counted back.
      missed = missedEvery(spec.every, window, anchor, next, missedBefore);
      next = occurrenceAtOrAfter(spec, window, anchor, missedBefore);
    }
    // Bounded: a cron schedule of every second over a day-long outage must not spin here;
    // what is left is taken on the next look.
    for (let steps = 0; next !== undefined && next <= horizon && steps < 100_000; steps++) {
      if (next < missedBefore) {
        missed.push(next);
        if (missed.length > MAX_CATCH_UP) missed.shift();
      } else {
        timely.push(next);
      }
      next = occurrenceAtOrAfter(spec, window, anchor, next + 1);
    }
    if (missed.length === 0 && timely.length === 0 && next === definition.next) return;
    const kept = definition.catchUp === 'all' ? missed.slice(-MAX_CATCH_UP) : definition.catchUp === 'latest' ? missed.slice(-1) : [];
    const route = { type: definition.type, partitions: definition.partitions };
    const occurrences = [...kept, ...timely].map((at) => occurrenceOf(definition, route, at));
    await this.settings.store(occurrences, false);
    const enqueued = [...kept, ...timely];
    const last = enqueued.length > 0 ? Math.max(...enqueued) : (definition.last ?? null);
    const advanced: ScheduleDefinition = { ...definition, next: next ?? null, ahead: timely.filter((at) => at > now), last };
    const keys = this.layout.recurringOf(route);
    if (await this.scripts.advanceSchedule(keys, definition.name, json, JSON.stringify(advanced))) return;
    // Another instance got there first. If it only advanced the same definition, our enqueues
    // were duplicates of its own; if the schedule was replaced or removed meanwhile, what we
    // enqueued ahead belongs to a definition that no longer exists.
    const successor = (await this.store.read(route, definition.name))?.definition;
    if (successor?.version === definition.version) return;
    await this.settleAhead({ ...definition, ahead: occurrences.map((o) => o.at) }, successor);
  }

  /** What a replaced definition enqueued ahead of its time: see settleAhead(). */
  private settleAhead(old: ScheduleDefinition, successor: ScheduleDefinition | undefined): Promise<void> {
    return settleAhead(old, successor, this.settings.store, this.settings.cancel);
  }
}

/**
 * What a replaced or removed definition enqueued ahead of its time: an
 * occurrence the new definition also has is stored again with its payload
 * (`replace`, so one the new definition stored meanwhile is not lost); any
 * other is cancelled, leaving no idempotency mark.
 */
async function settleAhead(old: ScheduleDefinition, successor: ScheduleDefinition | undefined, store: RecurringSettings['store'] | undefined, cancel: RecurringSettings['cancel']): Promise<void> {
  const route = { type: old.type, partitions: old.partitions };
  const now = Date.now();
  for (const at of old.ahead ?? []) {
    if (at <= now) continue;
    if (successor && store && occurrenceAtOrAfter(successor.spec, successor.window, successor.anchor, at) === at) {
      await store([occurrenceOf(successor, route, at)], true);
    } else {
      await cancel(route, occurrenceId(old.name, at));
    }
  }
}

/** Each schedule of a type as `schedules()` shows it. */
export async function describeSchedules(store: RecurringStore, route: EventRoute): Promise<RecurringSchedule[]> {
  return (await store.readAll(route)).map(({ definition: d }) => ({
    type: d.type,
    name: d.name,
    spec: 'every' in d.spec ? { every: d.spec.every } : { cron: d.spec.cron, tz: d.spec.tz },
    next: d.next === null ? undefined : new Date(d.next),
    startAt: d.window.startAt === undefined ? undefined : new Date(d.window.startAt),
    endAt: d.window.endAt === undefined ? undefined : new Date(d.window.endAt),
    catchUp: d.catchUp,
    context: d.context ?? {},
    last: d.last === undefined || d.last === null ? undefined : new Date(d.last),
  }));
}

/** Every schedule of every type under the prefix, by type and name. */
export async function describeAllSchedules(store: RecurringStore): Promise<RecurringSchedule[]> {
  const all = await Promise.all((await store.routes()).map((route) => describeSchedules(store, route)));
  return all.flat().sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : a.name.localeCompare(b.name)));
}

/** Removes a schedule and cancels the occurrences it enqueued ahead; resolves whether it existed. */
export async function removeSchedule(store: RecurringStore, route: EventRoute, name: string, cancel: RecurringSettings['cancel']): Promise<boolean> {
  const previous = await store.remove(route, name);
  if (!previous) return false;
  await settleAhead(previous, undefined, undefined, cancel);
  return true;
}

function occurrenceOf(definition: ScheduleDefinition, route: EventRoute, at: number): Occurrence {
  const id = occurrenceId(definition.name, at);
  const payload = { ...definition.payload, id };
  const json = JSON.stringify(definition.context ? [Date.now(), payload, definition.context] : [Date.now(), payload]);
  // The template's version, not the class's here: an upgraded instance's upcasters read it.
  return { route, id, body: versionedBody(json, definition.eventVersion ?? 1), at };
}

/** The last MAX_CATCH_UP occurrences of an interval schedule from `from` up to (not including) `before`, oldest first. */
function missedEvery(every: number, window: Window, anchor: number, from: number, before: number): number[] {
  let last = anchor + (Math.ceil((before - anchor) / every) - 1) * every;
  if (window.endAt !== undefined && last > window.endAt) last = anchor + Math.floor((window.endAt - anchor) / every) * every;
  const missed: number[] = [];
  for (let at = last; at >= from && missed.length < MAX_CATCH_UP; at -= every) missed.unshift(at);
  return missed;
}

/** Whether two definitions describe the same schedule (what `schedule()` was given; not where it has got to). */
function sameSchedule(a: ScheduleDefinition, b: ScheduleDefinition): boolean {
  const given = (d: ScheduleDefinition) =>
    JSON.stringify([d.type, d.partitions, d.spec, d.window.startAt ?? null, d.window.endAt ?? null, d.catchUp, d.payload, d.eventVersion ?? 1, d.context ?? null]);
  return given(a) === given(b);
}
