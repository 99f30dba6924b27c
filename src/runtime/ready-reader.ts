import { randomBytes } from 'node:crypto';
import { Observable } from 'rxjs';
import type { ClaimLog, ClaimResult, ClaimedRecord, LuaScripts, RedisClient } from '../redis/lua-scripts';
import { METRIC, type Metrics } from './metrics';
import { OutageBackoff, sleep } from './outage-backoff';
import type { RedisConnections } from '../redis/redis-connections';
import type { TypeKeys } from '../redis/redis-layout';
import type { HandlerSlots } from './handler-slots';
import { Wakeup } from './wakeup';
import type { TypeActivity } from './activity-log';

export interface ReaderSettings {
  readonly leaseMs: number;
  readonly maxAttempts: number;
  /** How long one blocking wait lasts in Redis. */
  readonly blockMs: number;
  /** How much longer than blockMs a blocking call may take before its connection is presumed dead. */
  readonly watchdogGraceMs: number;
  /** Counts for the fleet's activity charts (option recordActivity), if kept. */
  readonly activity?: TypeActivity;
}

export interface ClaimedEvent extends ClaimedRecord {
  /** Redis clock when the event was claimed; with dueAt it gives lateness free of host clock skew. */
  readonly claimedAt: number;
  /** The queue (type, or partition of a type) it was claimed from, and the reader to report success to. */
  readonly keys: TypeKeys;
  readonly reader: ReadyReader;
}

interface PendingSuccess {
  readonly id: string;
  readonly attempt: number;
  resolve(completed: boolean): void;
  reject(error: unknown): void;
}

/**
 * Successes and claims per script call: enough to amortise the round trip, few
 * enough to keep Redis responsive and within what Lua's unpack takes.
 */
const MAX_COMPLETIONS = 1_000;
const MAX_CLAIMS = 1_000;
/** How often a reader of a paused type asks again. */
const PAUSED_RECHECK_MS = 1_000;

/**
 * The hot stream of one type's ready events, claimed only as fast as handler
 * slots free up, and the way successes are recorded: they ride on the next
 * claim (one round trip for both) or, when the reader is idle in Redis, go
 * alone at once. Only one claim per reader is in flight at a time; it asks for
 * the slots it reserved (its share of the free ones, when several partitions'
 * readers share a handler) plus the slots the ridden successes release, so the
 * handler never gets more events than it can run.
 *
 * When the ready list is empty it blocks in Redis on its own connection,
 * which a watchdog replaces if a call outlives its timeout (a half-open
 * socket after a network fault would otherwise block forever).
 */
export class ReadyReader {
  private blocking: RedisClient | undefined;
  private readonly successes: PendingSuccess[] = [];
  /** True while the loop may pick successes up; false while it blocks in Redis or has stopped. */
  private collecting = false;
  private readonly wakeup = new Wakeup();
  private wakeScheduled = false;
  private flushScheduled = false;
  /** This reader's claim log key; each claim it makes is logged there under a new token. */
  private readonly claimLogKey: string;
  private claims = 0;
  /** A claim whose reply never came: its events are given back before the next claim. */
  private lostClaim: ClaimLog | undefined;

  constructor(
    private readonly keys: TypeKeys,
    private readonly scripts: LuaScripts,
    private readonly connections: RedisConnections,
    private readonly metrics: Metrics,
    private readonly settings: ReaderSettings,
  ) {
    this.claimLogKey = keys.claimLogPrefix + randomBytes(8).toString('hex');
  }

  /** Records a handler's success; resolves true when completed, false when its attempt was stale. */
  complete(id: string, attempt: number): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.successes.push({ id, attempt, resolve, reject });
      if (!this.collecting) this.flushSoon();
      else this.wakeSoon();
    });
  }

  /** Woken on the next turn, so the successes of one tick share a call. */
  private wakeSoon(): void {
    if (this.wakeScheduled) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      this.wakeup.wake();
    });
  }

  /** Emits claimed events until `stop` aborts, then completes; each emitted event has taken a slot. */
  claimed$(slots: HandlerSlots, stop: AbortSignal): Observable<ClaimedEvent> {
    return new Observable<ClaimedEvent>((subscriber) => {
      const tags = { type: this.keys.type, group: this.keys.group };
      const backoff = new OutageBackoff();
      // The one listener this reader puts on its stop signal: wake the loop, end a blocking wait.
      const onStop = () => {
        this.wakeup.wake();
        this.dropBlockingConnection();
      };
      stop.addEventListener('abort', onStop, { once: true });
      const leaveSlots = slots.join(() => this.wakeup.wake());
      const loop = async () => {
        this.collecting = true;
        while (!stop.aborted && !subscriber.closed) {
          await this.whenWork(slots, stop);
          if (stop.aborted) break;
          if (this.lostClaim && !(await this.releaseLostClaim(stop))) {
            // Redis is still out of reach: successes waiting for a call fail now, as they
            // would in a claim, so their writers keep retrying through the outage.
            for (const s of this.successes.splice(0)) s.reject(new Error('recording the result failed'));
            await sleep(backoff.next(), stop);
            continue;
          }
          const succeeded = this.successes.splice(0, MAX_COMPLETIONS);
          // Alone, a reader reuses the slots its successes release in the same call. Sharing
          // slots with other partitions' readers, it lets them go back to the pool, whose turns are fair.
          const reuse = slots.readerCount === 1 ? succeeded.length : 0;
          const reserved = stop.aborted ? 0 : slots.reserve(MAX_CLAIMS - Math.min(MAX_CLAIMS, reuse));
          const claim: ClaimLog = { log: this.claimLogKey, token: String(++this.claims) };
          const count = stop.aborted ? 0 : reserved + reuse;
          try {
            const result = await this.scripts.completeAndClaim(this.keys, succeeded, count, this.settings.leaseMs, this.settings.maxAttempts, claim);
            backoff.reset();
            settle(succeeded, result);
            // Claims beyond the reservation use the slots the successes give back.
            const claimed = result.claimed.length;
            if (claimed > reserved) slots.take(claimed - reserved);
            else if (claimed < reserved) slots.give(reserved - claimed);
            this.metrics.count(METRIC.deadLettered, { ...tags, reason: 'lease-expired' }, result.deadLettered.length);
            if (result.deadLettered.length > 0) this.settings.activity?.deadLettered(result.deadLettered.length);
            if (this.metrics.noticing) {
              for (const d of result.deadLettered) this.metrics.notice({ kind: 'dead-letter', ...tags, id: d.id, attempt: d.attempt, reason: 'lease-expired', error: `lease expired on attempt ${d.attempt}` });
            }
            if (claimed > 0) {
              this.metrics.count(METRIC.events, { ...tags, direction: 'dequeue' }, claimed);
              // Events already claimed are handed on even if stop aborted meanwhile: their leases are ours.
              // A literal, not a spread: this runs once per event, and spreading costs more than the copy.
              for (const r of result.claimed) subscriber.next({ id: r.id, attempt: r.attempt, dueAt: r.dueAt, body: r.body, claimedAt: result.now, keys: this.keys, reader: this });
            } else if (result.paused) {
              // Paused for every instance: look again a little later (resume takes effect within this).
              await sleep(Math.min(PAUSED_RECHECK_MS, this.settings.blockMs), stop);
            } else if (result.deadLettered.length === 0 && succeeded.length === 0) {
              await this.waitForReady(stop);
            }
          } catch {
            if (reserved > 0) slots.give(reserved);
            // Redis may have run the claim and lost only the reply: give back whatever it took.
            if (count > 0) this.lostClaim = claim;
            for (const s of succeeded) s.reject(new Error('recording the result failed'));
            if (stop.aborted) break;
            this.metrics.count(METRIC.redisErrors, { loop: 'reader', type: this.keys.type });
            await sleep(backoff.next(), stop);
          }
        }
        this.collecting = false;
        stop.removeEventListener('abort', onStop);
        leaveSlots();
        this.flushSoon();
        this.dropBlockingConnection();
        subscriber.complete();
      };
      void loop();
      return () => this.dropBlockingConnection();
    });
  }

  /**
   * Gives back the events of the claim whose reply was lost, so they are
   * claimed again without waiting out their leases or spending an attempt.
   * False while Redis cannot be reached.
   */
  private async releaseLostClaim(stop: AbortSignal): Promise<boolean> {
    const lost = this.lostClaim;
    if (!lost) return true;
    try {
      const released = await this.scripts.releaseClaim(this.keys, lost);
      this.lostClaim = undefined;
      this.metrics.count(METRIC.claimsReleased, { type: this.keys.type, group: this.keys.group }, released);
      return true;
    } catch {
      if (!stop.aborted) this.metrics.count(METRIC.redisErrors, { loop: 'reader', type: this.keys.type });
      return false;
    }
  }

  /** Resolves when a slot is free or a success waits to be recorded. */
  private async whenWork(slots: HandlerSlots, stop: AbortSignal): Promise<void> {
    while (this.successes.length === 0 && slots.free <= 0 && !stop.aborted) await this.wakeup.wait();
  }

  /** Sends waiting successes on their own (no claim), on the next turn. */
  private flushSoon(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      if (this.collecting) return; // the loop took over meanwhile
      const succeeded = this.successes.splice(0, MAX_COMPLETIONS);
      if (this.successes.length > 0) this.flushSoon();
      if (succeeded.length === 0) return;
      this.scripts.completeAndClaim(this.keys, succeeded, 0, this.settings.leaseMs, this.settings.maxAttempts, { log: this.claimLogKey, token: '' }).then(
        (result) => settle(succeeded, result),
        (error: unknown) => succeeded.forEach((s) => s.reject(error)),
      );
    });
  }

  /**
   * Blocks until the ready list holds something. BLMOVE from the list to its own
   * head leaves the list as it was, so the event is still claimed atomically by
   * complete-and-claim.lua and a crash here loses nothing.
   */
  private async waitForReady(stop: AbortSignal): Promise<void> {
    // Successes that arrived during the last call go out with the next one instead.
    if (this.successes.length > 0) return;
    if (stop.aborted) return;
    const connection = (this.blocking ??= this.connections.duplicate());
    let watchdog: NodeJS.Timeout | undefined;
    const watchdogFired = new Promise<'watchdog'>((resolve) => {
      watchdog = setTimeout(() => resolve('watchdog'), this.settings.blockMs + this.settings.watchdogGraceMs);
    });
    // Successes arriving while we block must not wait for the block to end.
    this.collecting = false;
    try {
      const outcome = await Promise.race([connection.blmove(this.keys.ready, this.keys.ready, 'LEFT', 'LEFT', this.settings.blockMs / 1000), watchdogFired]);
      if (outcome === 'watchdog') {
        this.metrics.count(METRIC.watchdogResets, { type: this.keys.type });
        this.dropBlockingConnection();
      }
    } finally {
      this.collecting = true;
      clearTimeout(watchdog);
    }
  }

  private dropBlockingConnection(): void {
    if (this.blocking) this.connections.release(this.blocking);
    this.blocking = undefined;
  }
}

function settle(succeeded: readonly PendingSuccess[], result: ClaimResult): void {
  if (result.stale.length === 0) {
    for (const s of succeeded) s.resolve(true);
    return;
  }
  const stale = new Set(result.stale);
  succeeded.forEach((s, i) => s.resolve(!stale.has(i)));
}
