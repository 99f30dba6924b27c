import type { EventRoute } from '../core/delayed-event.decorator';
import { MAX_CATCH_UP, occurrenceAtOrAfter } from '../core/recurrence';
import type { ScheduleDefinition } from '../redis/recurring-store';
import { type CancelOccurrence, type StoreOccurrences, missedEvery, occurrenceId, occurrenceOf } from './recurring-definitions';
import { MOST_CAUGHT_UP, type OccurrenceState, overlapStep } from '../core/schedule-policy';

/** What advancing a schedule with a policy needs (src/service/recurring-schedules.ts gives it). */
export interface PolicyParts {
  readonly pollIntervalMs: number;
  readonly store: StoreOccurrences;
  readonly cancel: CancelOccurrence;
  /** Where an occurrence is now (src/service/schedule-policy.ts). */
  readonly stateOf: (route: EventRoute, id: string) => Promise<OccurrenceState>;
  /** A schedule's definition as stored now, or undefined when it is gone. */
  readonly read: (definition: ScheduleDefinition) => Promise<ScheduleDefinition | undefined>;
  /** Told of each definition this advance stored (what a self-heal stores again). */
  readonly saw?: (definition: ScheduleDefinition) => void;
  /** Stores `next` in place of `read` (the JSON read), only if it is still that: of several instances one wins. */
  readonly replace: (definition: ScheduleDefinition, read: string, next: ScheduleDefinition) => Promise<boolean>;
}

/** How many occurrences pauseOnFailure watches at most (the latest enqueued). */
const WATCHED = 100;

/**
 * Advances a schedule with a policy (since 0.6; schedule-policy.ts). Unlike a
 * schedule without one, whose occurrences are deterministic (any instance may
 * enqueue them, the duplicates are harmless), what runs here depends on what
 * each instance sees (the previous occurrence still running, a dead letter):
 * the decision is stored first, by compare-and-set, and the occurrences it
 * names (`pending`) are stored after, and again by any instance at its next
 * look until one clears the list. Resolves when it wants to look again (the
 * next occurrence of a schedule with an overlap policy, which is never
 * enqueued ahead), or undefined.
 */
export async function advanceWithPolicy(parts: PolicyParts, json: string, read: ScheduleDefinition): Promise<number | undefined> {
  const route = { type: read.type, partitions: read.partitions };
  let d = read;
  let text = json;
  const step = async (next: ScheduleDefinition): Promise<boolean> => {
    if (!(await parts.replace(d, text, next))) return false;
    d = next;
    text = JSON.stringify(next);
    parts.saw?.(next);
    return true;
  };
  if (d.pending && d.pending.length > 0) {
    await parts.store(
      d.pending.map((at) => occurrenceOf(d, route, at)),
      false,
    );
    if (!(await step({ ...d, pending: [] }))) return undefined;
  }
  if (d.paused) return undefined;
  const policy = d.policy ?? {};
  const now = Date.now();
  let watch = d.watch ?? [];
  if (policy.pauseOnFailure && watch.length > 0) {
    const states = await Promise.all(watch.map((at) => parts.stateOf(route, occurrenceId(d.name, at))));
    const dead = watch.find((_, i) => states[i]!.dead);
    watch = watch.filter((_, i) => states[i]!.live);
    if (dead !== undefined) {
      const paused = { at: now, reason: `occurrence ${occurrenceId(d.name, dead)} was dead-lettered` };
      if (await step({ ...d, paused, watch, ahead: [], pending: [] })) await cancelAhead(parts, d, route, now);
      return undefined;
    }
  }
  if (d.next === null && (d.buffered ?? null) === null) {
    if (watch.length !== (d.watch ?? []).length) await step({ ...d, watch });
    return undefined;
  }
  const overlap = policy.overlap;
  // With an overlap policy nothing is enqueued ahead: whether it runs is decided at its due time.
  const horizon = overlap ? now : now + parts.pollIntervalMs;
  const missedBefore = now - 2 * parts.pollIntervalMs;
  const most = policy.catchUpWindowMs !== undefined ? MOST_CAUGHT_UP : MAX_CATCH_UP;
  let missed: number[] = [];
  let missedCount = 0;
  const timely: number[] = [];
  let next: number | undefined = d.next ?? undefined;
  if (next !== undefined && next < missedBefore && 'every' in d.spec) {
    const counted = missedEvery(d.spec.every, d.window, d.anchor, next, missedBefore, most);
    missed = counted.missed;
    missedCount = counted.all;
    next = occurrenceAtOrAfter(d.spec, d.window, d.anchor, missedBefore);
  }
  for (let steps = 0; next !== undefined && next <= horizon && steps < 100_000; steps++) {
    if (next < missedBefore) {
      missed.push(next);
      missedCount++;
      if (missed.length > most) missed.shift();
    } else {
      timely.push(next);
    }
    next = occurrenceAtOrAfter(d.spec, d.window, d.anchor, next + 1);
  }
  const windowStart = policy.catchUpWindowMs === undefined ? Number.NEGATIVE_INFINITY : now - policy.catchUpWindowMs;
  const kept = d.catchUp === 'all' ? missed.filter((at) => at >= windowStart).slice(-most) : d.catchUp === 'latest' ? missed.slice(-1) : [];
  let skipped = missedCount - kept.length;
  let run = [...kept, ...timely];
  let buffered = d.buffered ?? null;
  if (overlap) {
    const previousLive = d.last !== undefined && d.last !== null && (await parts.stateOf(route, occurrenceId(d.name, d.last))).live;
    const decided = overlapStep(overlap, run, previousLive, buffered);
    run = decided.run;
    skipped += decided.skipped;
    buffered = decided.buffered;
  }
  const runs = d.runs ?? 0;
  let ended = next === undefined;
  if (policy.limit !== undefined) {
    run = run.slice(0, Math.max(0, policy.limit - runs));
    if (runs + run.length >= policy.limit) {
      ended = true;
      buffered = null;
    }
  }
  const unchanged = run.length === 0 && skipped === 0 && (ended ? null : (next ?? null)) === d.next && buffered === (d.buffered ?? null) && watch.length === (d.watch ?? []).length;
  if (!unchanged) {
    const decided: ScheduleDefinition = {
      ...d,
      next: ended ? null : (next ?? null),
      // Added to what earlier looks enqueued ahead (a jitter longer than the interval keeps several there).
      ahead: [...new Set([...(d.ahead ?? []), ...run])].filter((at) => occurrenceOf(d, route, at).at > now),
      last: run.length > 0 ? Math.max(...run) : (d.last ?? null),
      runs: runs + run.length,
      skipped: (d.skipped ?? 0) + skipped,
      buffered,
      pending: run,
      ...(policy.pauseOnFailure ? { watch: [...watch, ...run].slice(-WATCHED) } : {}),
    };
    if (!(await step(decided))) return undefined;
    const stored = run.map((at) => occurrenceOf(d, route, at));
    await parts.store(stored, false);
    if (!(await step({ ...d, pending: [] }))) {
      // Changed meanwhile: another instance sent them too and cleared the list, or the schedule was
      // paused, replaced or removed before they were stored. Then what they would run ahead of its time goes.
      const successor = await parts.read(d);
      if (!successor || successor.paused || successor.version !== d.version) {
        const later = Date.now();
        for (const o of stored) if (o.at > later) await parts.cancel(route, o.id);
      }
    }
  }
  if (!overlap) return undefined;
  // The next due time; while one waits behind a running occurrence, the next poll looks whether it left.
  const nextDue = d.next ?? Number.POSITIVE_INFINITY;
  return d.buffered !== null && d.buffered !== undefined ? Math.min(nextDue, now + parts.pollIntervalMs) : Number.isFinite(nextDue) ? nextDue : undefined;
}

/** Cancels what a schedule enqueued ahead of `now` (a pause). */
export async function cancelAhead(parts: Pick<PolicyParts, 'cancel'>, d: ScheduleDefinition, route: EventRoute, now: number): Promise<void> {
  for (const at of d.ahead ?? []) {
    const occurrence = occurrenceOf(d, route, at);
    if (occurrence.at > now) await parts.cancel(route, occurrence.id);
  }
}
