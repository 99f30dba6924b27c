import { InvalidArgumentError } from '../core/errors';
import { checkTarget } from './inspection-checks';
import type { EventTarget } from './inspection-types';
import { ExplainCalls } from './explain-calls';
import { type BackfillRange, ScheduleControls, checkBackfillRange, checkScheduleName } from './schedule-controls';

/**
 * One recurring schedule's controls (since 0.6; docs/api.md, "Recurring
 * schedules"): pause and resume it without pausing its type, and backfill a
 * past range. On the Inspector and the service alike.
 */
export abstract class ScheduleInspectorCalls extends ExplainCalls {
  private controls: ScheduleControls | undefined;

  private get scheduleControls(): ScheduleControls {
    this.controls ??= new ScheduleControls({
      store: this.recurring,
      replace: (definition, read, next) =>
        this.parts.scripts.advanceSchedule(this.parts.layout.recurringOf({ type: definition.type, partitions: definition.partitions }), definition.name, read, JSON.stringify(next)),
      cancel: (route, id) => this.parts.scripts.cancel(this.parts.layout.forEvent(route, id), id, false),
      chain: async (occurrence, after) => {
        if (!this.parts.chainOccurrence) throw new InvalidArgumentError('backfill', 'stores occurrences, which an Inspector does not: call it on a DelayedEventService');
        return this.parts.chainOccurrence(occurrence, after);
      },
      wake: () => this.parts.onScheduleChanged?.(),
    });
    return this.controls;
  }

  /**
   * Pauses one recurring schedule, in every instance, until resumeSchedule():
   * no occurrence is enqueued meanwhile, and those it had enqueued ahead are
   * cancelled; its type is not paused. False when there is no such schedule.
   */
  pauseSchedule(target: EventTarget, name: string): Promise<boolean> {
    return this.bounded(
      'pauseSchedule',
      () => (checkTarget(target), checkScheduleName(name)),
      async () => {
        const route = await this.recurringRoute(target);
        return route ? this.scheduleControls.pause(route, name) : false;
      },
    );
  }

  /**
   * Resumes a paused schedule (by pauseSchedule() or pauseOnFailure) from now
   * on: occurrences that fell while it was paused do not run, and count as
   * skipped. False when there is no such schedule.
   */
  resumeSchedule(target: EventTarget, name: string): Promise<boolean> {
    return this.bounded(
      'resumeSchedule',
      () => (checkTarget(target), checkScheduleName(name)),
      async () => {
        const route = await this.recurringRoute(target);
        return route ? this.scheduleControls.resume(route, name) : false;
      },
    );
  }

  /**
   * Runs a schedule's occurrences due in [from, to) (past Dates, at most
   * 10,000 occurrences), oldest first, one after another: each waits until the
   * one before it settled. Calling it again over the same range stores nothing
   * twice (the schedule keeps a record of what was backfilled). Resolves how
   * many occurrences it stored.
   */
  backfill(target: EventTarget, name: string, range: BackfillRange): Promise<number> {
    return this.whenReady(
      () => {
        if (!this.parts.chainOccurrence) throw new InvalidArgumentError('backfill', 'stores occurrences, which an Inspector does not: call it on a DelayedEventService');
        return (checkTarget(target), checkScheduleName(name), checkBackfillRange(range, Date.now()));
      },
      async (checked) => {
        const route = await this.recurringRoute(target);
        if (!route) return this.scheduleControls.backfill({ type: typeof target === 'string' ? target : '', partitions: 1 }, name, checked);
        return this.scheduleControls.backfill(route, name, checked);
      },
    );
  }
}
