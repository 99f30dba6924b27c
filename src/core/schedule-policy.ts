import { InvalidArgumentError, describe } from './errors';

// A recurring schedule's policy (since 0.6; docs/api.md, "Recurring schedules"):
// what happens when an occurrence falls due while the previous one still runs,
// how far back a fleet that was down catches up, how many occurrences run,
// jitter, and pausing on a dead letter. Checked here; applied by
// src/service/recurring-schedules.ts.

/** What an occurrence falling due while the previous one is still stored does: runs beside it, is skipped, or waits (one at most). */
export type Overlap = 'allow' | 'skip' | 'buffer-one';

/** The policy options of schedule(), each optional. */
export interface SchedulePolicyOptions {
  /** Default 'allow' (every occurrence runs, whatever runs already). */
  readonly overlap?: Overlap;
  /** With catchUp 'all': only occurrences missed within this many ms before now run (oldest first); older ones are skipped. */
  readonly catchUpWindowMs?: number;
  /** Run at most this many occurrences, then the schedule ends. */
  readonly limit?: number;
  /** One occurrence now when the schedule is created or its definition changes, then the spec. */
  readonly immediately?: boolean;
  /** Each occurrence is due up to this many ms after its nominal time (deterministic per occurrence). */
  readonly jitterMs?: number;
  /** A dead-lettered occurrence pauses its schedule until resumeSchedule(). */
  readonly pauseOnFailure?: boolean;
}

/** The policy as stored in a definition: only what differs from the defaults, so a schedule without one stores what 0.5 stored. */
export interface StoredPolicy {
  readonly overlap?: 'skip' | 'buffer-one';
  readonly catchUpWindowMs?: number;
  readonly limit?: number;
  readonly immediately?: true;
  readonly jitterMs?: number;
  readonly pauseOnFailure?: true;
}

const DAY_MS = 86_400_000;
/** Longest catch-up window and jitter. */
export const MOST_CATCH_UP_WINDOW_MS = 30 * DAY_MS;
export const MOST_JITTER_MS = DAY_MS;
/** Most occurrences a catch-up window runs after an outage, and a backfill enqueues. */
export const MOST_CAUGHT_UP = 10_000;
export const MOST_LIMIT = 1_000_000_000;

function whole(value: unknown, what: string, least: number, most: number, unit = ''): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < least || value > most) {
    throw new InvalidArgumentError(`${what} of schedule`, `must be a whole number${unit} from ${least.toLocaleString('en-US')} to ${most.toLocaleString('en-US')}, got ${describe(value)}`);
  }
  return value;
}

function flag(value: unknown, what: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw new InvalidArgumentError(`${what} of schedule`, `must be true or false, got ${describe(value)}`);
  return value;
}

/** The policy options, checked; undefined when none differs from the defaults. */
export function checkPolicy(options: SchedulePolicyOptions, catchUp: string): StoredPolicy | undefined {
  const { overlap = 'allow', catchUpWindowMs, limit, jitterMs } = options;
  if (overlap !== 'allow' && overlap !== 'skip' && overlap !== 'buffer-one') {
    throw new InvalidArgumentError('overlap of schedule', `must be 'allow', 'skip' or 'buffer-one', got ${describe(overlap)}`);
  }
  const policy: { -readonly [K in keyof StoredPolicy]: StoredPolicy[K] } = {};
  if (overlap !== 'allow') policy.overlap = overlap;
  if (catchUpWindowMs !== undefined) {
    if (catchUp !== 'all')
      throw new InvalidArgumentError('catchUpWindowMs of schedule', `bounds catchUp: 'all', and catchUp is ${JSON.stringify(catchUp)}: set catchUp: 'all' or leave catchUpWindowMs out`);
    policy.catchUpWindowMs = whole(catchUpWindowMs, 'catchUpWindowMs', 1, MOST_CATCH_UP_WINDOW_MS, ' of ms');
  }
  if (limit !== undefined) policy.limit = whole(limit, 'limit', 1, MOST_LIMIT);
  if (flag(options.immediately, 'immediately')) policy.immediately = true;
  if (jitterMs !== undefined) {
    const jitter = whole(jitterMs, 'jitterMs', 0, MOST_JITTER_MS, ' of ms');
    if (jitter > 0) policy.jitterMs = jitter;
  }
  if (flag(options.pauseOnFailure, 'pauseOnFailure')) policy.pauseOnFailure = true;
  return Object.keys(policy).length > 0 ? policy : undefined;
}

/**
 * How late an occurrence is due after its nominal time, in [0, jitterMs):
 * FNV-1a of its id, so every instance moves it by the same amount.
 */
export function jitterOf(id: string, jitterMs: number | undefined): number {
  if (!jitterMs) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    hash ^= id.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % jitterMs;
}

/** Where an occurrence of a schedule is: still held scheduled, ready, running or waiting by any group; dead-lettered in any. */
export interface OccurrenceState {
  readonly live: boolean;
  readonly dead: boolean;
}

/** What one look decides for a schedule with an overlap policy, given the occurrences due now (oldest first). */
export interface OverlapStep {
  /** Nominal times to enqueue now, in order. */
  readonly run: number[];
  /** How many were skipped. */
  readonly skipped: number;
  /** The occurrence waiting behind the running one (buffer-one), or null. */
  readonly buffered: number | null;
}

/**
 * The overlap decision: while the previous occurrence is live, an occurrence
 * due is skipped ('skip') or kept as the one waiting ('buffer-one': the first
 * kept waits, later ones are skipped); when it is not, the waiting one runs
 * first, then the first due one, and the rest of those due in this look wait
 * or are skipped behind it (it has not run yet).
 */
export function overlapStep(overlap: 'skip' | 'buffer-one', due: readonly number[], previousLive: boolean, buffered: number | null): OverlapStep {
  const run: number[] = [];
  let skipped = 0;
  let waiting = buffered;
  let live = previousLive;
  if (!live && waiting !== null) {
    run.push(waiting);
    waiting = null;
    live = true;
  }
  for (const at of due) {
    if (!live) {
      run.push(at);
      live = true;
    } else if (overlap === 'buffer-one' && waiting === null) {
      waiting = at;
    } else {
      skipped++;
    }
  }
  return { run, skipped, buffered: waiting };
}
