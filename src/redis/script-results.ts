import { randomBytes } from 'node:crypto';
import { parseEnvelope } from '../core/envelope';
import type { LuaReplies } from './lua-sources.generated';

// What the scripts of lua/ take and answer, as LuaScripts (src/redis/lua-scripts.ts) types them.

export interface ClaimedRecord {
  readonly id: string;
  /**
   * The claim that took it (its lease's not-started score, lua/includes/lease-constants.lua):
   * every result names it, and applies only while the lease is still this claim's.
   */
  readonly claim: number;
  /** Whether its lease was written started: it was claimed for a free slot, and is confirmed by its claim. */
  readonly started: boolean;
  readonly attempt: number;
  readonly dueAt: number;
  readonly body: string;
}

export interface ClaimResult {
  readonly now: number;
  /** Positions (from 0) of the succeeded events passed in that were stale (fenced off); the others completed. */
  readonly stale: readonly number[];
  readonly claimed: ClaimedRecord[];
  readonly deadLettered: Array<{ id: string; attempt: number }>;
  /**
   * When the queue's limits left no room, how long to wait: ms until the rate
   * window or a hold lets a call start, -1 until a running call ends (a result
   * that frees room wakes the instances); 0 when the claim was not held back.
   */
  readonly throttledMs: number;
  /** Completions of this call freed room under a concurrency limit that a claim had found full. */
  readonly freed: boolean;
  /** It queued a flow notice for a parent (since 0.6): the queue's outbox is to be applied. */
  readonly noticed: boolean;
  /** Events this claim left for readers of a newer class version (no attempt spent). */
  readonly leftForNewerVersion: number;
  /** The type is paused: nothing was claimed, and no event held ahead confirmed. */
  readonly paused: boolean;
  /**
   * Positions (from 0) of the confirmations asked for that Redis refused: the
   * lease is no longer that claim's (cancelled, replaced, expired), or the
   * type is paused. The others may start.
   */
  readonly refused: readonly number[];
}

export interface DispatchResult {
  readonly movedDue: number;
  readonly movedExpired: number;
  /** Next due time or lease expiry, Redis clock; -1 when nothing waits. */
  readonly nextDue: number;
  readonly now: number;
  /** The queue's marker value (asked with `newMarker`): a value other than the one seen before says Redis lost its registrations. */
  readonly marker: string;
  /** Events moved from the default group's ready list to the named groups: it had no reader after a data loss. */
  readonly handedToGroups: number;
  /** Events in the ready list, when the look moved none (since 0.6): readers that missed a wake-up should look. */
  readonly readyWaiting: number;
}

/**
 * What an enqueue did: 'scheduled' (stored as a new event), 'duplicate' (left
 * as it was), 'replaced'; since 0.6 'debounced' (folded into the burst of an
 * event with this id) and 'throttled' (within the id's throttle window,
 * nothing changed). A `switch` over it that must be exhaustive handles all five.
 */
export type EnqueueStatus = 'scheduled' | 'duplicate' | 'replaced' | 'debounced' | 'throttled';

/**
 * How one enqueue call treats an id already stored (lua/enqueue.lua, ARGV
 * mode): '' leaves it, 'r' replaces it; the windows (since 0.6): 'd'
 * debounce, 'l' leading debounce with a trailing call, 'L' leading only, 't'
 * throttle, 'i' dedupe, 'k' dedupe keeping the last payload. `ms` is the
 * debounce's maxWaitMs or the throttle's windowMs (0 otherwise).
 */
export interface EnqueuePolicy {
  readonly mode: '' | 'r' | 'd' | 'l' | 'L' | 't' | 'i' | 'k';
  readonly ms: number;
}
export const PLAIN_POLICY: EnqueuePolicy = Object.freeze({ mode: '', ms: 0 });
export const REPLACE_POLICY: EnqueuePolicy = Object.freeze({ mode: 'r', ms: 0 });

/** An event as one claim took it: what a result names to be fenced by that claim. */
export interface ClaimedRef {
  readonly id: string;
  readonly claim: number;
  /** A success's result as JSON, when its call gave one (delivery.result, since 0.6). */
  readonly result?: string | undefined;
}

const NO_RESULTS: ReadonlyArray<{ readonly id: string; readonly result: string }> = [];

/** The results among successes, for complete-and-claim.lua; none (no allocation) when no call gave one. */
export function resultsOf(succeeded: ReadonlyArray<ClaimedRef>): ReadonlyArray<{ readonly id: string; readonly result: string }> {
  let results: Array<{ id: string; result: string }> | undefined;
  for (const s of succeeded) if (s.result !== undefined) (results ??= []).push({ id: s.id, result: s.result });
  return results ?? NO_RESULTS;
}

/** A value for a queue's marker: unique, so that a marker set anew differs from every one seen before. */
export function newMarkerValue(): string {
  return randomBytes(8).toString('hex');
}

/** Where a reader's claims are logged (a key in its queue's slot), and the token of the claim being made. */
export interface ClaimLog {
  readonly log: string;
  readonly token: string;
}

/** Replicas that must confirm an enqueue (Redis WAIT) before it counts as done. */
export interface Durability {
  readonly replicas: number;
  readonly timeoutMs: number;
}

/** When an event is due: relative to Redis's clock, or absolute. */
export type DueSpec = { readonly delayMs: number } | { readonly atMs: number };

export interface ScheduledBody {
  readonly id: string;
  readonly body: string;
  readonly due: DueSpec;
  /**
   * performance.now() when the store was asked for: a delay counts from then,
   * not from when Redis runs the script, so time spent in this process before
   * the call leaves (a batch gathering, a stalled event loop) does not make the
   * event late.
   */
  requestedAt: number;
}

/** One call on a type's dead letters: how many it acted on, and how many it took from the dead-letter set. */
export interface DeadLetterStep {
  readonly done: number;
  readonly taken: number;
}

/** lua/enqueue.lua's status numbers. */
const ENQUEUE_STATUSES: readonly EnqueueStatus[] = ['duplicate', 'scheduled', 'replaced', 'debounced', 'throttled'];

function enqueueStatus(status: number): EnqueueStatus {
  return ENQUEUE_STATUSES[status] ?? 'scheduled';
}

/** The enqueue script's reply: one status per event, or one event's status alone. */
export function enqueueStatuses(reply: unknown): EnqueueStatus[] {
  return typeof reply === 'number' ? [enqueueStatus(reply)] : (reply as number[]).map(enqueueStatus);
}

/**
 * complete-and-claim's reply as the reader takes it: each claimed envelope
 * split (its attempt is the claim's, one more than stored), the first
 * `startNow` marked started, positions counted from 0.
 */
export function claimResultOf(reply: LuaReplies['complete-and-claim'], startNow: number): ClaimResult {
  const flat = reply.claimed;
  const claimed: ClaimedRecord[] = [];
  const identity = Number(reply.claimScore);
  for (let i = 0; i < flat.length; i += 2) {
    const envelope = parseEnvelope(flat[i + 1]!);
    claimed.push({ id: flat[i]!, claim: identity, started: i < 2 * startNow, attempt: envelope.attempt + 1, dueAt: envelope.dueAt, body: envelope.body });
  }
  const deadLettered: Array<{ id: string; attempt: number }> = [];
  for (let i = 0; i < reply.dead.length; i += 2) deadLettered.push({ id: String(reply.dead[i]), attempt: Number(reply.dead[i + 1]) });
  return {
    now: reply.now,
    stale: reply.stale.map((position) => position - 1),
    claimed,
    deadLettered,
    paused: reply.paused,
    leftForNewerVersion: reply.left,
    throttledMs: reply.throttledMs,
    freed: reply.freed % 2 === 1,
    noticed: reply.freed >= 2,
    refused: reply.refused.map((position) => position - 1),
  };
}

/** Dead-letter retention as the scripts take it (keepDead): the newest `count`, none older than `ageMs`; 0 is no limit. */
export interface DeadRetention {
  readonly count: number;
  readonly ageMs: number;
}

/** No retention limit: every dead letter is kept until purged. */
export const KEEP_ALL: DeadRetention = Object.freeze({ count: 0, ageMs: 0 });
