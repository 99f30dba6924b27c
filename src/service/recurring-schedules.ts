import { whenReady } from '../redis/ready-gate';
import { randomBytes } from 'node:crypto';
import type { DelayedEventInstance, EventRoute } from '../core/delayed-event.decorator';
import { InvalidOptionError } from '../core/errors';
import type { EventCodec } from '../core/event-codec';
import type { EventContext } from '../core/event-context';
import { splitBodyVersion } from '../core/stored-body';
import { MAX_CATCH_UP, type RecurrenceSpec, checkSpec, checkWindow, occurrenceAtOrAfter } from '../core/recurrence';
import type { LuaScripts } from '../redis/lua-scripts';
import type { RedisClient } from '../redis/redis-client';
import { RecurringStore, type ScheduleDefinition } from '../redis/recurring-store';
import type { RedisLayout } from '../redis/redis-layout';
import { METRIC, type Metrics } from '../runtime/metrics';
import { OutageBackoff, sleep } from '../runtime/outage-backoff';
import { Wakeup } from '../runtime/wakeup';
import { type BackgroundService, LoopService } from '../runtime/background-service';
import { type PolicyParts, advanceWithPolicy } from './policy-advance';
import {
  type CancelOccurrence,
  type RecurringSchedule,
  type ScheduleOptions,
  type StoreOccurrences,
  describeSchedules,
  missedEvery,
  occurrenceId,
  occurrenceOf,
  removeSchedule,
  sameSchedule,
  settleAhead,
} from './recurring-definitions';
import { type OccurrenceState, checkPolicy } from '../core/schedule-policy';

export type { Occurrence, RecurringSchedule, ScheduleOptions } from './recurring-definitions';
export { checkScheduleKeys, describeAllSchedules, describeSchedules, occurrenceId, removeSchedule } from './recurring-definitions';

/** Schedule names end up in event ids (`<name>@<ms>`) and keys: no '@' or key separators. */
const SCHEDULE_NAME = /^[^\s@{}|#]{1,100}$/;

export interface RecurringSettings {
  /** How often the loop looks at every schedule, at most. */
  readonly pollIntervalMs: number;
  /** Stores occurrences: idempotently (an id stored or handled lately is a duplicate), or replacing what is stored. */
  readonly store: StoreOccurrences;
  /** Cancels an occurrence enqueued ahead when its schedule is replaced, removed or paused. */
  readonly cancel: CancelOccurrence;
  /** Where an occurrence is (since 0.6: overlap and pauseOnFailure read it). */
  readonly stateOf: (route: EventRoute, id: string) => Promise<OccurrenceState>;
  /** Redis lost the schedules this instance defined; they are being stored again. */
  readonly onLost: (type: string, names: readonly string[]) => void;
}

/** A schedule this instance defined, kept to store it again if Redis loses it. */
interface DefinedHere {
  readonly name: string;
  readonly template: DelayedEventInstance;
  readonly spec: RecurrenceSpec;
  readonly options: ScheduleOptions;
  /** The definition as this instance last read it (since 0.6): stored again as it was, counts and pause kept. */
  seen?: ScheduleDefinition;
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
  /** What advancing a schedule with a policy needs (src/service/policy-advance.ts). */
  private readonly policyParts: PolicyParts;

  constructor(
    private readonly client: RedisClient,
    private readonly scripts: LuaScripts,
    private readonly layout: RedisLayout,
    private readonly codec: EventCodec,
    private readonly metrics: Metrics,
    private readonly settings: RecurringSettings,
  ) {
    this.store = new RecurringStore(client, layout, (name, work) => scripts.bounded(name, work));
    this.policyParts = {
      pollIntervalMs: settings.pollIntervalMs,
      store: settings.store,
      cancel: settings.cancel,
      stateOf: settings.stateOf,
      read: async (d) => (await this.store.read({ type: d.type, partitions: d.partitions }, d.name))?.definition,
      saw: (d) => this.saw(d),
      replace: (definition, read, next) => scripts.advanceSchedule(layout.recurringOf({ type: definition.type, partitions: definition.partitions }), definition.name, read, JSON.stringify(next)),
    };
  }

  /**
   * Validates a schedule at the call (a typed error says what to fix; nothing is
   * stored) and stores it, replacing one of the same class and name.
   */
  async define<T extends DelayedEventInstance>(name: string, template: T, spec: RecurrenceSpec, options: ScheduleOptions, remembered?: ScheduleDefinition): Promise<void> {
    if (typeof name !== 'string' || !SCHEDULE_NAME.test(name)) {
      throw new InvalidOptionError('name', `must be 1-100 characters without '@', braces, '|', '#' or whitespace; got ${JSON.stringify(name)}`);
    }
    const stored = checkSpec(spec);
    const window = checkWindow(options.startAt, options.endAt, Date.now());
    const catchUp = options.catchUp ?? 'latest';
    if (!['none', 'latest', 'all'].includes(catchUp)) throw new InvalidOptionError('catchUp', `must be 'none', 'latest' or 'all', got ${JSON.stringify(catchUp)}`);
    const policy = checkPolicy(options, catchUp);
    // Encoded once as an occurrence would be: the codec's checks (size, keys it would drop) apply now.
    const probe = Object.assign(Object.create(Object.getPrototypeOf(template) as object) as T, template, { id: occurrenceId(name, 0) });
    const encoded = this.codec.encode(probe, options.context, Date.now());
    const [, payload, context] = JSON.parse(splitBodyVersion(encoded.body).json) as [number, Record<string, unknown>, EventContext | undefined];
    const now = Date.now();
    const anchor = window.startAt ?? ('every' in stored ? now + stored.every : now);
    const next = occurrenceAtOrAfter(stored, window, anchor, Math.max(now, window.startAt ?? now));
    const marker = await this.save(
      {
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
        ...(policy ? { policy } : {}),
      },
      remembered,
    );
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
  private async save(definition: ScheduleDefinition, remembered?: ScheduleDefinition): Promise<string | null> {
    const route = { type: definition.type, partitions: definition.partitions };
    for (let attempt = 0; ; attempt++) {
      const current = await this.store.read(route, definition.name);
      // Stored already (by another replica, or before markers existed): the marker is set if missing, and read.
      if (current && sameSchedule(current.definition, definition)) return this.store.ensureMarker(route);
      // Redis lost it, and this instance had seen it as it is declared now: stored again as it was
      // seen (its counts, pause and next occurrence), and `immediately` does not run again.
      const restored = !current && remembered !== undefined && sameSchedule(remembered, definition);
      const successor = restored ? { ...remembered, pending: [], ahead: [] } : carried(current?.definition, definition, Date.now());
      // Its counts, pause and what `immediately` runs depend on what was stored: stored only if that is
      // still what was read, so two instances storing one change at once run it once, and a pause made
      // meanwhile is not overwritten.
      if (!(await this.scripts.advanceSchedule(this.layout.recurringOf(route), definition.name, current?.json ?? '', JSON.stringify(successor)))) {
        if (attempt < 10) continue;
        throw new InvalidOptionError('name', `schedule ${JSON.stringify(definition.name)} kept changing while it was stored (10 tries); call schedule() again`);
      }
      const marker = await this.store.register(successor);
      if (current) await this.settleAhead(current.definition, successor);
      if (successor.pending && successor.pending.length > 0) {
        await this.settings.store(
          successor.pending.map((at) => occurrenceOf(successor, route, at)),
          false,
        );
      }
      this.wakeup.wake();
      return marker;
    }
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

  /** Keeps the latest definition read or stored of a schedule defined here: what a self-heal stores again. */
  private saw(definition: ScheduleDefinition): void {
    const mine = this.definedHere.get(JSON.stringify({ type: definition.type, partitions: definition.partitions }))?.schedules.get(definition.name);
    if (mine) mine.seen = definition;
  }

  /** Looks at every schedule now (one was paused or resumed). */
  look(): void {
    this.wakeup.wake();
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
        const lookAt = await this.advanceAll(signal);
        backoff.reset();
        await this.wakeup.wait(Math.max(0, Math.min(this.settings.pollIntervalMs, lookAt - Date.now())));
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
      for (const s of [...schedules.values()]) await this.define(s.name, s.template, s.spec, s.options, s.seen);
    }
  }

  /** Advances every schedule; resolves when one wants to be looked at again (before the next poll), if any. */
  private async advanceAll(signal: AbortSignal): Promise<number> {
    let lookAt = Number.POSITIVE_INFINITY;
    if (signal.aborted) return lookAt;
    for (const route of await this.store.routes()) {
      if (signal.aborted) return lookAt;
      for (const { json, definition } of await this.store.readAll(route)) {
        if (signal.aborted) return lookAt;
        this.saw(definition);
        if (!definition.policy && !definition.pending?.length) {
          await this.advance(json, definition);
          continue;
        }
        const wanted = await advanceWithPolicy(this.policyParts, json, definition);
        if (wanted !== undefined) lookAt = Math.min(lookAt, wanted);
      }
    }
    return lookAt;
  }

  /** Enqueues what is due within the next poll interval (and what catch-up keeps), then moves `next` on. */
  private async advance(json: string, definition: ScheduleDefinition): Promise<void> {
    if (definition.next === null || definition.paused) return;
    const now = Date.now();
    const horizon = now + this.settings.pollIntervalMs;
    const missedBefore = now - 2 * this.settings.pollIntervalMs;
    const { spec, window, anchor } = definition;
    let missed: number[] = [];
    let missedCount = 0;
    const timely: number[] = [];
    let next: number | undefined = definition.next;
    if (next < missedBefore && 'every' in spec) {
      // After an outage an interval schedule jumps: the missed occurrences it may
      // still run are the last MAX_CATCH_UP before missedBefore, counted back.
      ({ missed, all: missedCount } = missedEvery(spec.every, window, anchor, next, missedBefore, MAX_CATCH_UP));
      next = occurrenceAtOrAfter(spec, window, anchor, missedBefore);
    }
    // Bounded: a cron schedule of every second over a day-long outage must not spin here;
    // what is left is taken on the next look.
    for (let steps = 0; next !== undefined && next <= horizon && steps < 100_000; steps++) {
      if (next < missedBefore) {
        missed.push(next);
        missedCount++;
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
    const skipped = missedCount - kept.length;
    const advanced: ScheduleDefinition = { ...definition, next: next ?? null, ahead: timely.filter((at) => at > now), last, ...(skipped > 0 ? { skipped: (definition.skipped ?? 0) + skipped } : {}) };
    const keys = this.layout.recurringOf(route);
    if (await this.scripts.advanceSchedule(keys, definition.name, json, JSON.stringify(advanced))) return this.saw(advanced);
    // Another instance got there first. If it only advanced the same definition, our enqueues
    // were duplicates of its own; if the schedule was replaced or removed meanwhile, what we
    // enqueued ahead belongs to a definition that no longer exists.
    const successor = (await this.store.read(route, definition.name))?.definition;
    // Advanced by another instance; or paused meanwhile (since 0.6): what this look enqueued ahead goes.
    if (successor?.version === definition.version && !successor.paused) return;
    if (successor?.paused) {
      for (const o of occurrences) if (o.at > now) await this.settings.cancel(route, o.id);
      return;
    }
    await this.settleAhead({ ...definition, ahead: occurrences.map((o) => o.at) }, successor);
  }

  /** What a replaced definition enqueued ahead of its time: see settleAhead(). */
  private settleAhead(old: ScheduleDefinition, successor: ScheduleDefinition | undefined): Promise<void> {
    return settleAhead(old, successor, this.settings.store, this.settings.cancel);
  }
}

/**
 * The definition to store in place of `current` (undefined: a new schedule):
 * what schedule() was given, with what belongs to the schedule rather than to
 * its definition carried over (its counts, a pause, what waits or is pending,
 * the latest occurrence), and `immediately`'s occurrence at `now` added.
 */
function carried(current: ScheduleDefinition | undefined, given: ScheduleDefinition, now: number): ScheduleDefinition {
  const kept = current
    ? {
        ...(current.runs !== undefined ? { runs: current.runs } : {}),
        ...(current.skipped !== undefined ? { skipped: current.skipped } : {}),
        ...(current.paused ? { paused: current.paused } : {}),
        ...(current.buffered !== undefined && current.buffered !== null ? { buffered: current.buffered } : {}),
        ...(current.pending && current.pending.length > 0 ? { pending: current.pending } : {}),
        ...(current.watch && current.watch.length > 0 ? { watch: current.watch } : {}),
        ...(current.last !== undefined && current.last !== null ? { last: current.last } : {}),
      }
    : {};
  const successor: ScheduleDefinition = { ...given, ...kept };
  const policy = successor.policy;
  const runs = successor.runs ?? 0;
  if (!policy?.immediately || successor.paused || (policy.limit !== undefined && runs >= policy.limit)) {
    return policy?.limit !== undefined && runs >= policy.limit ? { ...successor, next: null } : successor;
  }
  const ran = runs + 1;
  return {
    ...successor,
    pending: [...(successor.pending ?? []), now],
    // Ahead of its time with a jitter: a pause, a change or unschedule cancels it like the others.
    ahead: [...(successor.ahead ?? []), now],
    last: now,
    runs: ran,
    ...(policy.pauseOnFailure ? { watch: [...(successor.watch ?? []), now] } : {}),
    ...(policy.limit !== undefined && ran >= policy.limit ? { next: null } : {}),
  };
}
