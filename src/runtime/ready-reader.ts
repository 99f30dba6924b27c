import { randomBytes } from 'node:crypto';
import { Observable } from 'rxjs';
import type { ClaimLog, ClaimResult, ClaimedRecord, ClaimedRef, LuaScripts } from '../redis/lua-scripts';
import { METRIC, type Metrics } from './metrics';
import { OutageBackoff, sleep } from './outage-backoff';
import type { TypeKeys } from '../redis/redis-layout';
import type { HandlerSlots } from './handler-slots';
import { Wakeup } from './wakeup';
import { type Confirmation, PendingResults } from './pending-results';
import { ReaderGiveBacks } from './reader-give-backs';
import { CONFIRMED_FOR_MS, ClaimedAhead } from './claimed-ahead';
import type { ReaderSettings } from './reader-settings';
import { ReaderIdle } from './reader-idle';

export type { ReaderSettings } from './reader-settings';

/** Ids sorted by key per look: as many as a claim may take. */
const SORT_STEP = 1_000;

export interface ClaimedEvent extends ClaimedRecord {
  /** Redis clock when the event was claimed; with dueAt it gives lateness free of host clock skew. */
  readonly claimedAt: number;
  /** When (performance.now()) its claim's reply arrived: the claim confirmed it then (ClaimedAhead). */
  readonly arrivedAt: number;
  /** The queue (type, or partition of a type) it was claimed from, and the reader to report success to. */
  readonly keys: TypeKeys;
  readonly reader: ReadyReader;
}

/** Claims per script call: enough to amortise the round trip, few enough to keep Redis responsive and within what Lua's unpack takes. */
const MAX_CLAIMS = 1_000;
/** How often a reader of a paused type asks again. */
const PAUSED_RECHECK_MS = 1_000;

/**
 * The hot stream of one type's ready events, and the way successes are
 * recorded: they ride on the next claim (one round trip for both) or, when the
 * reader is idle in Redis, go alone at once. Only one claim per reader is in
 * flight at a time. It asks for the slots it reserved (its share of the free
 * ones, when several partitions' readers share a handler) plus, while the
 * handler is quick, a few events ahead of them (HandlerSlots.aheadAllowed),
 * which wait here and start as slots free up: the next claim then runs in
 * Redis while the handler runs those, instead of each waiting for the other.
 * An event is emitted only with a slot for it, so the handler never runs more
 * calls than it has slots.
 *
 * When the ready list is empty it waits here, in this process, for a nudge
 * (a dispatcher here or a wake-up from another instance), a result to send,
 * or readerBlockMs at most; it holds no connection of its own.
 */
export class ReadyReader {
  /** Successes and start marks for the next call (src/runtime/pending-results.ts). */
  private readonly pending = new PendingResults();
  /** True while the loop may pick successes up; false before it starts and once it has stopped. */
  private collecting = false;
  private readonly wakeup = new Wakeup();
  /**
   * What ends an idle wait: a nudge (events may be ready), a result to send,
   * or stop. Not a slot given back: the loop offers slots after each claim,
   * and an idle wait ended by that would claim again and again.
   */
  private readonly idle: ReaderIdle;
  private wakeScheduled = false;
  private flushScheduled = false;
  /** This reader's claim log key; each claim it makes is logged there under a new token. */
  private readonly claimLogKey: string;
  private claims = 0;
  /** What it gives back to READY: a claim whose reply was lost, events held that will not start here. */
  private readonly giveBacks: ReaderGiveBacks<ClaimedEvent>;

  constructor(
    private readonly keys: TypeKeys,
    private readonly scripts: LuaScripts,
    private readonly metrics: Metrics,
    private readonly settings: ReaderSettings,
  ) {
    this.claimLogKey = keys.claimLogPrefix + randomBytes(8).toString('hex');
    this.giveBacks = new ReaderGiveBacks(keys, scripts, metrics, settings.onGivenBack);
    this.idle = new ReaderIdle(settings.blockMs, settings.listening);
  }

  /** Events wait here for a slot, or results to send: the queue is not idle here (src/runtime/quiet-looks.ts). */
  get holding(): boolean {
    return this.heldAhead() > 0 || this.pending.waiting;
  }

  private heldAhead: () => number = () => 0;

  /** Quiet, waiting for a nudge, holding nothing and owing nothing: its queue may be parked (src/runtime/parked-looks.ts). */
  get parkable(): boolean {
    return this.collecting && this.idle.parkable && !this.holding && !this.giveBacks.owed;
  }

  /** Records a handler's success; resolves true when completed, false when its claim was stale. */
  complete(event: ClaimedRef): Promise<boolean> {
    const recorded = this.pending.success(event);
    this.sendSoon();
    return recorded;
  }

  /** Has the next call mark an event claimed ahead as started. */
  private started(event: ClaimedRef): void {
    this.pending.started(event);
    this.sendSoon();
  }

  /**
   * Whether each event, about to start, may: one claimed within the last
   * CONFIRMED_FOR_MS is confirmed by its claim; Redis is asked about the
   * others on the next call (its claim still holds, the type is not paused).
   * One refused is gone (cancelled, replaced, its lease expired) or, paused
   * or stopping, was given back unstarted. Retried through an outage. Those
   * confirmed are marked started.
   */
  async confirm(events: readonly ClaimedEvent[]): Promise<boolean[]> {
    let answers: Confirmation[] = events.map(() => 'paused');
    if (this.collecting) {
      const now = performance.now();
      const asked = events.map((event) => (now - event.arrivedAt <= CONFIRMED_FOR_MS ? ('confirmed' as const) : this.pending.confirm(event)));
      if (this.pending.waiting) this.sendSoon();
      answers = await Promise.all(asked);
    }
    const back = events.filter((_, i) => answers[i] === 'paused');
    if (back.length > 0) await this.giveBacks.unstarted(back);
    // They start now: their start marks ride on the next call.
    events.forEach((event, i) => {
      if (answers[i] === 'confirmed') this.started(event);
    });
    return answers.map((answer) => answer === 'confirmed');
  }

  private sendSoon(): void {
    if (!this.collecting) this.flushSoon();
    else this.wakeSoon();
  }

  /** Woken on the next turn, so the successes of one tick share a call. */
  private wakeSoon(): void {
    if (this.wakeScheduled) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      this.wakeup.wake();
      this.wakeIdle();
    });
  }

  /** Emits claimed events until `stop` aborts, then completes; each emitted event has taken a slot. */
  claimed$(slots: HandlerSlots, stop: AbortSignal): Observable<ClaimedEvent> {
    return new Observable<ClaimedEvent>((subscriber) => {
      const tags = { type: this.keys.type, group: this.keys.group };
      const backoff = new OutageBackoff();
      const byConsumer = this.settings.confirmedByConsumer === true;
      const ahead = new ClaimedAhead<ClaimedEvent>(this.settings.graceMs / 2, !byConsumer);
      this.heldAhead = () => ahead.length;
      const planWithinMs = this.settings.graceMs / 4;
      const noteLate = () => {
        if (!ahead.anyLate) return;
        slots.startedLate();
        this.wakeup.wake();
      };
      // A slot offered by the handler's slots: the next waiting event starts in it.
      const startOne = (): boolean => {
        const next = subscriber.closed ? undefined : ahead.next();
        noteLate();
        if (next === undefined) {
          // The first in line waits for Redis to confirm it: the loop asks at once.
          if (ahead.needsConfirmation()) this.nudge();
          return false;
        }
        slots.take(1);
        if (!next.started && !byConsumer) this.started(next);
        subscriber.next(next);
        return true;
      };
      // The one listener this reader puts on its stop signal: wake the loop.
      const onStop = () => {
        this.wakeup.wake();
        this.wakeIdle();
      };
      stop.addEventListener('abort', onStop, { once: true });
      const leaveSlots = slots.join({ startOne, freed: () => this.wakeup.wake() });
      const room = () => slots.aheadAllowed(planWithinMs) - ahead.length;
      const hasWork = () => this.pending.waiting || ahead.anyLate || this.giveBacks.owed || (slots.free > 0 && (ahead.length === 0 || ahead.needsConfirmation())) || room() > 0;
      let servedLast = false;
      /** How long the last call took: confirmations cover the events expected to start before the next reply. */
      let lastCallMs = 1;
      const loop = async () => {
        this.collecting = true;
        while (!stop.aborted && !subscriber.closed) {
          // Waiting for work, it still wakes when the first waiting event would be too late to start.
          while (!stop.aborted) {
            const untilLate = ahead.sweep();
            noteLate();
            if (hasWork()) break;
            await this.wakeup.wait(untilLate);
          }
          if (stop.aborted) break;
          if (ahead.anyLate || this.giveBacks.owed) await this.giveBacks.unstarted(ahead.takeLate());
          if (!(await this.giveBacks.lostClaimReleased(stop))) {
            // Redis is still out of reach: successes waiting for a call fail now, as they
            // would in a claim, so their writers keep retrying through the outage.
            this.pending.failWaiting(new Error('recording the result failed'));
            await sleep(backoff.next(), stop);
            continue;
          }
          // Sharing slots with other partitions' readers, a reader whose last claim got events lets
          // those woken meanwhile reserve first (their wake-ups are queued already): turns stay fair.
          if (servedLast && slots.readerCount > 1) await Promise.resolve();
          const batch = this.pending.take();
          // Held events that will start before the next reply, and whose confirmation will be too old by
          // then, are confirmed again on this call: the handler never waits for a round trip while events wait here.
          const asked = ahead.toConfirm(slots.expectedStarts(Math.min(2 * lastCallMs, CONFIRMED_FOR_MS)), performance.now() + lastCallMs);
          const reserved = stop.aborted ? 0 : slots.reserve(MAX_CLAIMS);
          const count = stop.aborted ? 0 : reserved + Math.max(0, Math.min(MAX_CLAIMS - reserved, room()));
          const claim: ClaimLog = { log: this.claimLogKey, token: String(++this.claims) };
          // Events for the reserved slots start as soon as the reply comes, unless events claimed earlier wait
          // for them, or other partitions' readers share the slots (offer() hands them round: ours may wait).
          const startNow = ahead.length === 0 && slots.readerCount === 1 && !byConsumer ? reserved : 0;
          const confirm = asked.length === 0 ? batch.confirms : [...batch.confirms, ...asked.map((held) => held.event)];
          let result: ClaimResult;
          // This claim sees whatever nudges before it announced; one during it ends the next idle wait at once.
          this.idle.claimSent();
          try {
            if (count > 0 && this.settings.sortByKey) await this.sortReady(this.settings.sortByKey);
            const sentAt = performance.now();
            result = await this.scripts.completeAndClaim(this.keys, batch.succeeded, count, this.settings.leaseMs, this.settings.maxAttempts, claim, {
              startNow,
              started: batch.started,
              confirm,
              maxVersion: this.settings.version,
              sortsByKey: this.settings.sortByKey !== undefined,
              agingMs: this.settings.priorityAgingMs,
              heartbeatLeaseMs: this.settings.heartbeatLeaseMs,
            });
            lastCallMs = performance.now() - sentAt;
          } catch {
            ahead.confirmationsFailed(asked);
            slots.unreserve(reserved);
            slots.offer();
            // Redis may have run the claim and lost only the reply: give back whatever it took.
            if (count > 0) this.giveBacks.lost(claim);
            this.pending.failed(batch, new Error('recording the result failed'));
            if (stop.aborted) break;
            this.metrics.count(METRIC.redisErrors, { loop: 'reader', type: this.keys.type });
            await sleep(backoff.next(), stop);
            continue;
          }
          // Waits for a slot count from here: an event handed to a free slot at once never waits, however long the call took.
          const arrivedAt = performance.now();
          backoff.reset();
          this.pending.settled(batch, result);
          if (asked.length > 0 && !result.paused) {
            const ours = batch.confirms.length;
            ahead.settleConfirmations(asked, new Set(result.refused.filter((p) => p >= ours).map((p) => p - ours)), arrivedAt);
          }
          const claimed = result.claimed.length;
          if (claimed > 0 || batch.succeeded.length > 0) this.idle.active();
          if (claimed > 0) this.settings.onClaimed?.();
          servedLast = claimed > 0;
          if (result.freed || result.noticed) this.settings.onFreed?.(result.freed, result.noticed);
          if (result.throttledMs !== 0) this.metrics.count(METRIC.throttled, { ...tags, reason: result.throttledMs < 0 ? 'concurrency' : 'rate' });
          if (result.leftForNewerVersion > 0) {
            this.metrics.count(METRIC.leftForNewerVersion, tags, result.leftForNewerVersion);
            this.settings.onLeftForNewerVersion?.();
          }
          this.metrics.count(METRIC.deadLettered, { ...tags, reason: 'lease-expired' }, result.deadLettered.length);
          if (result.deadLettered.length > 0) this.settings.activity?.deadLettered(result.deadLettered.length);
          if (this.metrics.noticing) {
            for (const d of result.deadLettered)
              this.metrics.notice({ kind: 'dead-letter', ...tags, id: d.id, attempt: d.attempt, reason: 'lease-expired', error: `lease expired on attempt ${d.attempt}` });
          }
          if (claimed > 0) {
            this.metrics.count(METRIC.events, { ...tags, direction: 'dequeue' }, claimed);
            // Handed on even if stop aborted meanwhile (their leases are ours); a literal, not a spread: once per event.
            ahead.add(
              result.claimed.map((r) => ({
                id: r.id,
                claim: r.claim,
                started: r.started,
                attempt: r.attempt,
                dueAt: r.dueAt,
                body: r.body,
                claimedAt: result.now,
                arrivedAt,
                keys: this.keys,
                reader: this,
              })),
              arrivedAt,
              // The claim confirms them (their leases are new, the type was not paused); one that waits
              // longer than CONFIRMED_FOR_MS for a slot is confirmed again before it starts.
              claimed,
            );
          }
          // The reserved slots, and any freed meanwhile, go to the waiting events: every reader's in turn.
          slots.unreserve(reserved);
          slots.offer();
          if (result.paused) {
            // Paused for every instance: what waits here goes back, confirmed or not (none of it started), and
            // the reader looks again a little later (resume takes effect within this).
            await this.giveBacks.unstarted(ahead.takeAll());
            await sleep(Math.min(PAUSED_RECHECK_MS, this.settings.blockMs), stop);
          } else if (claimed === 0 && result.throttledMs !== 0) {
            // Held back by the queue's limits: until the window has room (or the hold ends), or until a running
            // call ends somewhere (its result wakes every instance), and at most blockMs.
            await this.waitForReady(stop, result.throttledMs > 0 ? result.throttledMs : Number.POSITIVE_INFINITY, false);
          } else if (claimed === 0 && result.deadLettered.length === 0 && result.leftForNewerVersion === 0 && batch.succeeded.length === 0 && batch.started.length === 0 && confirm.length === 0) {
            // Nothing ready: block in Redis until something is, but not past the moment an event
            // waiting here would be too late, nor while one already is (it goes back first).
            const untilLate = ahead.sweep();
            noteLate();
            if (!ahead.anyLate) await this.waitForReady(stop, untilLate);
          }
        }
        // Stopping, or abandoned by a close that stopped waiting: what waits unstarted goes back
        // now rather than when its lease expires; so do the events a batch waits to confirm.
        this.collecting = false;
        for (const waiting of this.pending.takeConfirmations()) waiting.resolve('paused');
        await this.giveBacks.unstarted(ahead.takeAll());
        stop.removeEventListener('abort', onStop);
        leaveSlots();
        this.flushSoon();
        subscriber.complete();
      };
      void loop();
    });
  }

  /** Sorts the head of the ready list into its keys' lists (lua/classify.lua): claims then take from the keys in turn. */
  private async sortReady(sortByKey: NonNullable<ReaderSettings['sortByKey']>): Promise<void> {
    const events = await this.scripts.peekReady(this.keys, SORT_STEP);
    if (events.length > 0) await this.scripts.classify(this.keys, sortByKey(events));
  }

  /** Sends waiting successes and start marks on their own (no claim), on the next turn. */
  private flushSoon(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      if (this.collecting) return; // the loop took over meanwhile
      const batch = this.pending.take();
      if (this.pending.waiting) this.flushSoon();
      if (batch.succeeded.length === 0 && batch.started.length === 0) return;
      this.scripts
        .completeAndClaim(
          this.keys,
          batch.succeeded,
          0,
          this.settings.leaseMs,
          this.settings.maxAttempts,
          { log: this.claimLogKey, token: '' },
          { started: batch.started, maxVersion: this.settings.version, sortsByKey: this.settings.sortByKey !== undefined, heartbeatLeaseMs: this.settings.heartbeatLeaseMs },
        )
        .then(
          (result) => {
            if (result.freed || result.noticed) this.settings.onFreed?.(result.freed, result.noticed);
            this.pending.settled(batch, result);
          },
          (error: unknown) => this.pending.failed(batch, error),
        );
    });
  }

  /**
   * Waits, in this process, until something may be ready: a nudge (a
   * dispatcher here or in another instance moved events to this queue, see
   * nudge()), a success or start mark to send, or `blockMs` at the latest,
   * when the loop looks again by itself. No connection blocks in Redis per
   * reader: an instance's connections do not grow with its handled types.
   */
  private waitForReady(stop: AbortSignal, mostMs = Infinity, mayQuiet = true): Promise<void> {
    // Successes and start marks that arrived during the last call go out with the next one instead.
    return this.idle.wait(() => this.pending.waiting || stop.aborted, mostMs, mayQuiet);
  }

  /** Events may be ready in this reader's queue: it looks at once (when it waits for work). */
  nudge(): void {
    this.wakeup.wake();
    this.wakeIdle();
  }

  /** Events wait unclaimed in its queue: a quiet reader looks, at most once per readerBlockMs (a busy one looks by itself). */
  nudgeIfQuiet(): void {
    this.idle.nudgeIfQuiet(() => this.nudge());
  }

  private wakeIdle(): void {
    this.idle.wake();
  }
}
