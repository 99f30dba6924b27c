import type { Observable } from 'rxjs';
import { type BackgroundService, LoopService } from './background-service';
import { type DeadRetention, type LuaScripts, newMarkerValue } from '../redis/lua-scripts';
import { METRIC, type Metrics } from './metrics';
import { OutageBackoff, sleep } from './outage-backoff';
import { DEFAULT_GROUP, type TypeKeys } from '../redis/redis-layout';
import { WAKE_ALL, WAKE_LOST, type Wake } from './wake-listener';
import { Wakeup } from './wakeup';
import { QUIET_AFTER_MS, QUIET_LOOK_MS, QUIET_LOOK_REGISTERED_MS, type QuietWatch, quietLookIn } from './quiet-looks';

export interface DispatcherSettings {
  readonly batchSize: number;
  readonly pollIntervalMs: number;
  /** A handler of the default group runs in this instance: once the type has named groups, the default group stays registered. */
  readonly defaultGroupHere: boolean;
  /**
   * The type's dispatcher: the group registrations of this instance on the
   * queue. While it has named groups there, each look reads the queue's
   * marker: a missing one (Redis lost its data) has the look register them
   * again before it moves anything, and a changed one is told to onMarker,
   * so that they are registered again for good (lua/dispatch-due.lua).
   */
  readonly registrations?: DispatcherRegistrations;
  /** Told when a look moved events to a ready list: the readers here look at once. */
  readonly onMoved?: () => void;
  /** keepDead of the group whose keys these are: each look drops the dead letters past it. */
  readonly keepDead?: DeadRetention;
  /** The type's dispatcher: after each look, the queue's flow notices (since 0.6; src/runtime/flow-sweep.ts). */
  readonly flows?: { afterLook(): Promise<void>; ifPoked(): Promise<void>; poke(): void };
  /** Lets its looks go quiet while the queue is idle (since 0.6; src/runtime/quiet-looks.ts); without it, it looks every pollIntervalMs. */
  readonly quiet?: QuietWatch;
  /** Told when a look found events in the ready list: the readers here look (a wake-up they missed). */
  readonly onReadyWaiting?: () => void;
}

export interface DispatcherRegistrations {
  /** The groups this instance handles on the queue now ('default' among them for a default-group handler). */
  groups(): readonly string[];
  /** Whether this instance saw the queue's marker before: then a missing one means a loss. */
  markerSeenBefore(): boolean;
  /** The marker each look read. */
  onMarker(marker: string): void;
}

/**
 * Moves one type's due events (and expired leases) into its ready list.
 * Sleeps until the next due time, wakes early on a wake-up or a local nudge,
 * and never sleeps longer than the poll interval. Any number of instances may
 * dispatch the same type: the move is one atomic script, so there is no lock.
 */
export class Dispatcher implements BackgroundService {
  private readonly wakeup = new Wakeup();
  private readonly lifecycle = new LoopService((signal) => this.run(signal));

  constructor(
    private readonly keys: TypeKeys,
    private readonly scripts: LuaScripts,
    private readonly metrics: Metrics,
    private readonly settings: DispatcherSettings,
    private readonly wakes$: Observable<Wake>,
  ) {}

  /** Something became due earlier than planned (e.g. a retry scheduled here); look again now. */
  nudge(): void {
    this.lookWanted = true;
    this.lookIsCheck = false;
    this.wakeup.wake();
  }

  /** Whether it may stay quiet has changed (a handler call started here, the subscription was lost): it asks again now. */
  check(): void {
    // A wake while not waiting is kept for the next wait, which then ends at once.
    if (this.quietNow) this.wakeup.wake();
  }

  /**
   * Something may have been missed (the subscription came back, an instance
   * went silent): look now, flow notices too. Not activity of the queue: a
   * quiet queue stays quiet after that look.
   */
  lookEverywhere(): void {
    this.settings.flows?.poke();
    // A nudge already asked for a look: that one stays activity.
    if (!this.lookWanted) this.lookIsCheck = true;
    this.lookWanted = true;
    this.wakeup.wake();
  }

  /** A flow notice waits in the queue's outbox (since 0.6): apply it now, without a look if none is due yet. */
  nudgeFlows(): void {
    this.wakeup.wake();
  }

  /** A look is asked for (a nudge, a wake-up); else one is due at performance.now() `dueAt`, or `pollIntervalMs` after the last (`quietUntil` when quiet). */
  private lookWanted = true;
  /** It decided last that it may wait quietly: a wait only check(), a nudge or the look's time ends. */
  private quietNow = false;
  /** The look asked for is a check (lookEverywhere), not a sign of activity. */
  private lookIsCheck = false;
  private dueAt = 0;
  private lastLookAt = 0;
  private quietUntil = 0;
  /** When (performance.now()) the queue was last seen doing something here: a look that moved events, a nudge, a handler call. */
  private activeAt = 0;

  start(): void {
    this.lifecycle.start();
  }

  stop(): Promise<void> {
    return this.lifecycle.stop();
  }

  /** The dispatch loop, until `signal` aborts (LoopService). */
  private async run(signal: AbortSignal): Promise<void> {
    const onAbort = () => this.wakeup.wake();
    signal.addEventListener('abort', onAbort, { once: true });
    const wakeSubscription = this.wakes$.subscribe((wake) => {
      // A wake with a due time below 0 says events are ready (for readers), not that one is due sooner.
      if (wake.due < 0) return;
      if (wake.tag === WAKE_LOST) this.check();
      else if (wake.tag === WAKE_ALL) this.lookEverywhere();
      // A due of 0 (resume) is for every dispatcher of the queue, a named group's own among them.
      else if (wake.tag === this.keys.tag || (wake.due === 0 && wake.tag === this.keys.queueTag)) this.nudge();
    });
    try {
      await this.loop(signal);
    } finally {
      wakeSubscription.unsubscribe();
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** What a look sends of this instance's registrations: only while it has named groups on the queue. */
  private registrationsNow(): { newMarker: string; markerSeenBefore: boolean; groups: readonly string[] } | undefined {
    const registrations = this.settings.registrations;
    const groups = registrations?.groups() ?? [];
    if (!registrations || !groups.some((g) => g !== DEFAULT_GROUP)) return undefined;
    return { newMarker: newMarkerValue(), markerSeenBefore: registrations.markerSeenBefore(), groups };
  }

  /** Nothing happened here for QUIET_AFTER_MS, nothing runs here, and wake-ups reach this instance: looks may wait. */
  private isQuiet(now: number): boolean {
    const quiet = this.settings.quiet;
    if (!quiet) return false;
    if (quiet.busy()) this.activeAt = now;
    return now - this.activeAt >= QUIET_AFTER_MS && quiet.listening();
  }

  /** When a quiet look comes at the latest: named groups registered here keep the data-loss bound. */
  private quietEveryMs(): number {
    const registered = this.settings.registrations?.groups().some((g) => g !== DEFAULT_GROUP) === true;
    return Math.max(this.settings.pollIntervalMs, registered ? QUIET_LOOK_REGISTERED_MS : QUIET_LOOK_MS);
  }

  private async loop(signal: AbortSignal): Promise<void> {
    const backoff = new OutageBackoff();
    const tags = { type: this.keys.type, group: this.keys.group };
    const flows = this.settings.flows;
    while (!signal.aborted) {
      // Whatever woke us before this look, the look itself will see.
      this.wakeup.clear();
      try {
        const now = performance.now();
        if (this.lookWanted) {
          if (!this.lookIsCheck) this.activeAt = now;
        } else {
          // No look asked for: one is due when something falls due, or pollIntervalMs after the last (later when
          // quiet: until check() says a handler call started here or the subscription was lost).
          const quiet = this.isQuiet(now);
          this.quietNow = quiet;
          const lookAt = Math.min(this.dueAt, quiet ? this.quietUntil : this.lastLookAt + this.settings.pollIntervalMs);
          if (now < lookAt) {
            // Woken for the flow notices alone (a result here queued one), or to ask again.
            await flows?.ifPoked();
            // Not yet quiet, it asks again within pollIntervalMs (its queue becomes quiet by time passing).
            await this.wakeup.wait(quiet ? lookAt - now : Math.min(lookAt - now, this.settings.pollIntervalMs));
            continue;
          }
        }
        this.lookWanted = false;
        this.lookIsCheck = false;
        this.quietNow = false;
        this.lastLookAt = now;
        const result = await this.scripts.dispatchDue(this.keys, this.settings.batchSize, this.settings.defaultGroupHere, this.registrationsNow(), this.settings.keepDead);
        backoff.reset();
        // Stopped while the look ran: what it reports may send more (registering groups again); nothing is sent now.
        if (signal.aborted) break;
        if (result.marker !== '') this.settings.registrations?.onMarker(result.marker);
        if (result.handedToGroups > 0) this.metrics.count(METRIC.dispatched, { ...tags, reason: 'due' }, result.handedToGroups);
        const moved = result.movedDue + result.movedExpired + result.handedToGroups;
        // A paused queue (readyWaiting -1) is not quiet: its looks come every pollIntervalMs, as before 0.6.
        if (moved > 0 || result.readyWaiting < 0) this.activeAt = performance.now();
        const quiet = this.isQuiet(performance.now());
        if (moved > 0) this.settings.onMoved?.();
        // Events wait unclaimed: readers here that are quiet (waiting for word alone) look (src/runtime/ready-reader.ts).
        else if (result.readyWaiting > 0) this.settings.onReadyWaiting?.();
        this.metrics.count(METRIC.dispatched, { ...tags, reason: 'due' }, result.movedDue);
        this.metrics.count(METRIC.dispatched, { ...tags, reason: 'lease-expired' }, result.movedExpired);
        // A quiet queue's outbox is swept when poked: by a result here, or by the look every queue makes when an instance falls silent.
        await (quiet ? flows?.ifPoked() : flows?.afterLook());
        this.dueAt = 0;
        if (result.movedDue + result.movedExpired >= this.settings.batchSize) continue;
        const untilNext = result.nextDue < 0 ? Infinity : Math.max(0, result.nextDue - result.now);
        const after = performance.now();
        this.dueAt = after + untilNext;
        this.quietUntil = after + quietLookIn(this.quietEveryMs());
        await this.wakeup.wait(Math.min(untilNext, this.settings.pollIntervalMs));
      } catch {
        this.lookWanted = true;
        this.metrics.count(METRIC.redisErrors, { loop: 'dispatcher', type: this.keys.type });
        await sleep(backoff.next(), signal);
      }
    }
  }
}
