import type { DelayedEventInstance, EventClass } from '../core/delayed-event.decorator';
import type { Delay } from '../core/duration';
import type { JsonEvent } from '../core/stored-body';
import type { DueTimeline } from '../redis/due-timeline';
import type { LimitUse } from '../redis/flow-limits';
import type { InstanceInfo } from '../redis/instance-registry';
import type { EventCounts, EventState, EventTypeInfo } from '../redis/stored-types';
import type { ActivitySlot } from '../runtime/activity-log';
import type { DeadLetter, DeadLetterPage, DueTimelineOptions, EventTarget, InspectedEvent, ListOptions } from './inspection-types';
import type { Inspector } from './inspector';
import type { RecurringSchedule } from './recurring-schedules';
import type { BackfillRange } from './schedule-controls';
import type { CancelOptions } from './inspection-checks';
import type { CleanOptions, DrainOptions, ObliterateOptions } from './bulk-calls';
import type { OutcomesOptions, WaitForOptions } from './outcome-calls';
import type { OutcomeEvent } from '../redis/outcome-streams';
import type { Explanation } from '../redis/explanations';
import type { Observable } from 'rxjs';
import type { StoredVersions, UpgradeReport, VerifyOptions, VerifyReport } from './stored-versions';

/**
 * The service's inspection and control calls (docs/api.md, "Inspection"):
 * the same as createInspector() gives, on the service's own connection, each
 * a delegate to its Inspector. DelayedEventService extends it.
 */
export abstract class InspectionCalls {
  protected abstract readonly inspector: Inspector;

  // Inspection and control (src/service/inspector.ts; docs/api.md, "Inspection"); the
  // same calls as createInspector() gives, on this service's connection. Each takes an
  // event class, or a type name: then payloads come back as parsed JSON.

  /** Every event type with stored events, registered groups, recurring schedules or a pause under this prefix, whichever instance stored them. */
  types(): Promise<EventTypeInfo[]> {
    return this.inspector.types();
  }

  /** The live instances of this prefix that handle events, this one among them: each one's host, pid, start and handlers, as it answers now. */
  instances(): Promise<InstanceInfo[]> {
    return this.inspector.instances();
  }

  /** Events in each state (and per group, where groups are registered); undefined for a type name nothing is stored under. */
  counts(eventClass: EventTarget): Promise<EventCounts | undefined> {
    return this.inspector.counts(eventClass);
  }

  /** One stored event and its state, or undefined. */
  find<T extends DelayedEventInstance>(eventClass: EventClass<T>, id: string): Promise<InspectedEvent<T> | undefined>;
  find(type: string, id: string): Promise<InspectedEvent<JsonEvent> | undefined>;
  find<T extends DelayedEventInstance>(eventClass: EventTarget<T>, id: string): Promise<InspectedEvent<T | JsonEvent> | undefined> {
    return this.inspector.find(eventClass, id);
  }

  /** One page (limit 1..1,000) of the events in `state`, in that state's order. */
  list<T extends DelayedEventInstance>(eventClass: EventClass<T>, state: EventState, options?: ListOptions): Promise<Array<InspectedEvent<T>>>;
  list(type: string, state: EventState, options?: ListOptions): Promise<Array<InspectedEvent<JsonEvent>>>;
  list<T extends DelayedEventInstance>(eventClass: EventTarget<T>, state: EventState, options?: ListOptions): Promise<Array<InspectedEvent<T | JsonEvent>>> {
    return this.inspector.list(eventClass, state, options);
  }

  /** Removes waiting events (since 0.6): without `group`, the type's schedule and every group's READY events; with it, that group's READY events and retries. In flight untouched; resolves how many deliveries went. */
  drain(eventClass: EventTarget, options?: DrainOptions): Promise<number> {
    return this.inspector.drain(eventClass, options);
  }

  /** Deletes a group's dead letters or history records older than `olderThanMs` (since 0.6); resolves how many went. */
  clean(eventClass: EventTarget, state: 'dead' | 'handled', options: CleanOptions): Promise<number> {
    return this.inspector.clean(eventClass, state, options);
  }

  /** Removes every key of the type (since 0.6); refuses with TypeInUseError while an instance handles it, unless `force`. */
  obliterate(eventClass: EventTarget, options?: ObliterateOptions): Promise<boolean> {
    return this.inspector.obliterate(eventClass, options);
  }

  /** Since 0.6: each outcome of a type's calls (or every type's) from now, or after `from`, read from the outcome streams (the outcomes option). */
  outcomes$(eventClass?: EventTarget, options?: OutcomesOptions): Observable<OutcomeEvent> {
    return this.inspector.outcomes$(eventClass, options);
  }

  /** Since 0.6: the final outcome (handled, dead-lettered, cancelled) of one event, from any process; WaitTimeoutError after `timeoutMs`. */
  waitFor(eventClass: EventTarget, id: string, options: WaitForOptions): Promise<OutcomeEvent> {
    return this.inspector.waitFor(eventClass, id, options);
  }

  /** Since 0.6: what holds an event back (or what it is doing), in each group: a gate, until when, the figures and a sentence. */
  explain(eventClass: EventTarget, id: string): Promise<Explanation | undefined> {
    return this.inspector.explain(eventClass, id);
  }

  /** The recurring schedules of `eventClass` (or a type name), each with its spec and next occurrence; without one, every schedule of the prefix. */
  schedules<T extends DelayedEventInstance>(eventClass?: EventClass<T> | string): Promise<RecurringSchedule[]> {
    return this.inspector.schedules(eventClass);
  }

  /** Removes a stored event in any state; resolves whether it existed. A flow's parent takes the children it waits for along, unless `cascade: false` (since 0.6). */
  cancel<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, id: string, options?: CancelOptions): Promise<boolean> {
    return this.inspector.cancel(eventClass, id, options);
  }

  /** Pauses one recurring schedule in every instance (since 0.6), cancelling what it enqueued ahead, until resumeSchedule(); its type is not paused. False when there is no such schedule. */
  pauseSchedule<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, name: string): Promise<boolean> {
    return this.inspector.pauseSchedule(eventClass, name);
  }

  /** Resumes a paused schedule from now on (since 0.6): what fell while it was paused does not run, and counts as skipped. False when there is no such schedule. */
  resumeSchedule<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, name: string): Promise<boolean> {
    return this.inspector.resumeSchedule(eventClass, name);
  }

  /**
   * Runs a schedule's occurrences due in [from, to) (since 0.6; past Dates, at
   * most 10,000), oldest first, each after the one before settled; called again
   * over the same range it stores nothing twice. Resolves how many it stored.
   */
  backfill<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, name: string, range: BackfillRange): Promise<number> {
    return this.inspector.backfill(eventClass, name, range);
  }

  /** Moves a scheduled or ready event to a new due time (a delay from now, or a Date), keeping payload, context and attempts; false when it is not stored, in flight or dead. */
  reschedule(eventClass: EventTarget, id: string, delayOrDate: Delay | Date): Promise<boolean> {
    return this.inspector.reschedule(eventClass, id, delayOrDate);
  }

  /** Makes a scheduled or ready event due at once; false when it is not stored, in flight or dead. */
  runNow(eventClass: EventTarget, id: string): Promise<boolean> {
    return this.inspector.runNow(eventClass, id);
  }

  /** Stops dispatching and claiming the type in every instance, across restarts, until resume(); enqueues still store. */
  pause(eventClass: EventTarget): Promise<boolean> {
    return this.inspector.pause(eventClass);
  }

  resume(eventClass: EventTarget): Promise<boolean> {
    return this.inspector.resume(eventClass);
  }

  isPaused(eventClass: EventTarget): Promise<boolean> {
    return this.inspector.isPaused(eventClass);
  }

  /** How many scheduled events fall due in each slot from now to a horizon (default an hour in 60 slots); undefined for a type name nothing is stored under. */
  dueTimeline(eventClass: EventTarget, options?: DueTimelineOptions): Promise<DueTimeline | undefined> {
    return this.inspector.dueTimeline(eventClass, options);
  }

  /** What the whole fleet enqueued, handled, failed and dead-lettered of the type, and its lateness, per 10 s over the last `windowMs` (default 15 min, at most 1 h). */
  activity(eventClass: EventTarget, windowMs?: number): Promise<ActivitySlot[]> {
    return this.inspector.activity(eventClass, windowMs);
  }

  /** One page of the dead letters of `eventClass` in `group` (default: the default group), oldest first. */
  deadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T>, page?: DeadLetterPage): Promise<Array<DeadLetter<T>>>;
  /** By type name, for tools without the app's classes: events come back as parsed JSON. */
  deadLetters(type: string, page?: DeadLetterPage): Promise<Array<DeadLetter<JsonEvent>>>;
  deadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, page?: DeadLetterPage): Promise<Array<DeadLetter<T | JsonEvent>>> {
    return this.inspector.deadLetters(eventClass, page);
  }

  /** Moves dead letters back to scheduled in their group (due now, attempts reset); no ids means all of the group's. */
  replayDeadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, ids?: readonly string[], options?: { group?: string }): Promise<number> {
    return this.inspector.replayDeadLetters(eventClass, ids, options);
  }

  /** Deletes dead letters of a group; no ids means all of the group's. */
  purgeDeadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, ids?: readonly string[], options?: { group?: string }): Promise<number> {
    return this.inspector.purgeDeadLetters(eventClass, ids, options);
  }

  /** The flow limits each group of the type enforces, and their use now (calls started in the window, running, a hold); undefined for a type name nothing is stored under. */
  limits(eventClass: EventTarget): Promise<Record<string, LimitUse> | undefined> {
    return this.inspector.limits(eventClass);
  }

  // Changing an event class (docs/changing-event-classes.md).

  /** Reads every stored event and schedule template of the type with this class and its upcasters; reports what it cannot read, changes nothing. */
  verifyStored<T extends DelayedEventInstance>(eventClass: EventClass<T>, options?: VerifyOptions): Promise<VerifyReport> {
    return this.inspector.verifyStored(eventClass, options);
  }

  /** Rewrites stored bodies and templates older than this class's version at its version: in fenced steps, safe beside handlers, resumable. */
  upgradeStored<T extends DelayedEventInstance>(eventClass: EventClass<T>): Promise<UpgradeReport> {
    return this.inspector.upgradeStored(eventClass);
  }

  /** How many stored events (and schedule templates) of the type each class version wrote; undefined for a type name nothing is stored under. */
  versions(eventClass: EventTarget): Promise<StoredVersions | undefined> {
    return this.inspector.versions(eventClass);
  }
}
