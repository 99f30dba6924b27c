import type { ClaimResult, ClaimedRef } from '../redis/lua-scripts';

interface PendingSuccess extends ClaimedRef {
  resolve(completed: boolean): void;
  reject(error: unknown): void;
}

/** What Redis said of an event held that was about to start: start it, it is gone (cancelled, replaced, expired), or the type is paused. */
export type Confirmation = 'confirmed' | 'revoked' | 'paused';

interface PendingConfirmation extends ClaimedRef {
  resolve(answer: Confirmation): void;
}

/** Successes, start marks and confirmations of one call, as taken for it. */
export interface ResultBatch {
  readonly succeeded: readonly PendingSuccess[];
  /** Events a batch handler gathered, to confirm before its call starts: the call's first confirmations. */
  readonly confirms: readonly PendingConfirmation[];
  /** The start marks worth sending with these successes (see take()). */
  readonly started: readonly ClaimedRef[];
  /** Every start mark taken, sent or not: put back if the call fails. */
  readonly marks: readonly ClaimedRef[];
}

/**
 * Successes and start marks a reader has yet to send (they ride on its next
 * call), enough to amortise a round trip, few enough to keep Redis responsive
 * and within what Lua's unpack takes.
 */
const MAX_PER_CALL = 1_000;

/**
 * What a reader's handlers reported and Redis has not heard yet: successes,
 * each settled by the call that records it, and the starts of events claimed
 * ahead, so that only an attempt that ran counts when a lease runs out
 * (lua/includes/lease-constants.lua).
 */
export class PendingResults {
  private readonly successes: PendingSuccess[] = [];
  private readonly starts: ClaimedRef[] = [];
  private readonly confirms: PendingConfirmation[] = [];

  get waiting(): boolean {
    return this.successes.length > 0 || this.starts.length > 0 || this.confirms.length > 0;
  }

  /** An event to confirm before its handler starts; resolves what Redis said (asked again after a failed call). */
  confirm(event: ClaimedRef): Promise<Confirmation> {
    return new Promise((resolve) => {
      this.confirms.push({ id: event.id, claim: event.claim, resolve });
    });
  }

  /** The reader stopped: the confirmations still waiting, to be answered 'paused' (their events go back, unstarted). */
  takeConfirmations(): PendingConfirmation[] {
    return this.confirms.splice(0);
  }

  /** A success to record; resolves true when completed, false when its claim was stale. */
  success(event: ClaimedRef): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.successes.push({ id: event.id, claim: event.claim, result: event.result, resolve, reject });
    });
  }

  /** An event claimed ahead whose handler started. */
  started(event: ClaimedRef): void {
    this.starts.push({ id: event.id, claim: event.claim });
  }

  /**
   * The results for one call. A start whose success rides on the same call
   * is not sent: the success completes the event and its lease goes with it
   * (with quick handlers that is most of them, and each mark costs Redis a
   * lookup and a write). By id and claim: a late success of an earlier claim
   * of the id does not end this one.
   */
  take(): ResultBatch {
    const succeeded = this.successes.splice(0, MAX_PER_CALL);
    const marks = this.starts.splice(0, MAX_PER_CALL);
    const confirms = this.confirms.splice(0, MAX_PER_CALL);
    if (marks.length === 0 || succeeded.length === 0) return { succeeded, started: marks, marks, confirms };
    const done = new Set<string>();
    for (const s of succeeded) done.add(`${s.claim}:${s.id}`);
    return { succeeded, started: marks.filter((s) => !done.has(`${s.claim}:${s.id}`)), marks, confirms };
  }

  /** The call recorded them: each success learns whether it completed its event, each confirmation what Redis said. */
  settled(batch: ResultBatch, result: ClaimResult): void {
    if (batch.confirms.length > 0) {
      const refused = new Set(result.refused);
      batch.confirms.forEach((c, i) => c.resolve(result.paused ? 'paused' : refused.has(i) ? 'revoked' : 'confirmed'));
    }
    if (result.stale.length === 0) {
      for (const s of batch.succeeded) s.resolve(true);
      return;
    }
    const stale = new Set(result.stale);
    batch.succeeded.forEach((s, i) => s.resolve(!stale.has(i)));
  }

  /**
   * The call failed. Its successes fail (their writers retry them through the
   * outage); its start marks go out with the next call (marking is idempotent,
   * and fenced by the claim). A mark that never lands before the lease runs
   * out makes that expiry spend no attempt, and the event runs again in the
   * same attempt (lua/dispatch-due.lua): the sooner it lands once Redis
   * answers, the rarer that is. Those of events whose success rode on the call
   * are kept too: the success is retried by its writer, and may come after the
   * lease ran out.
   */
  failed(batch: ResultBatch, error: unknown): void {
    if (batch.marks.length > 0) this.starts.unshift(...batch.marks);
    // Nothing starts unconfirmed: they are asked again with the next call.
    if (batch.confirms.length > 0) this.confirms.unshift(...batch.confirms);
    for (const s of batch.succeeded) s.reject(error);
  }

  /** Redis is out of reach: successes waiting for a call fail now, as they would in one, so their writers retry. */
  failWaiting(error: unknown): void {
    for (const s of this.successes.splice(0)) s.reject(error);
  }
}
