import type { Observable } from 'rxjs';
import { type BackgroundService, LoopService } from './background-service';
import { type DeadRetention, type LuaScripts, newMarkerValue } from '../redis/lua-scripts';
import type { DispatchResult } from '../redis/script-results';
import { METRIC, type Metrics } from './metrics';
import { OutageBackoff, sleep } from './outage-backoff';
import { DEFAULT_GROUP, type TypeKeys } from '../redis/redis-layout';
import { WAKE_ALL, WAKE_LOST, type Wake } from './wake-listener';
import { Wakeup } from './wakeup';
import { QUIET_AFTER_MS, QUIET_LOOK_MS, QUIET_LOOK_REGISTERED_MS, type QuietWatch, quietLookIn } from './quiet-looks';

/** What one look sends, and what it reports to: the same for a running dispatcher and a parked queue's look (src/runtime/parked-looks.ts). */
export interface DispatchLook {
  readonly keys: TypeKeys;
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
  /** keepDead of the group whose keys these are: each look drops the dead letters past it. */
  readonly keepDead?: DeadRetention;
}

/** What a running dispatcher is told besides its looks. */
export interface DispatcherSettings {
  /** Told when a look moved events to a ready list: the readers here look at once. */
  readonly onMoved?: () => void;
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
  private readonly keys: TypeKeys;

  constructor(
    private readonly look: DispatchLook,
    private readonly scripts: LuaScripts,
    private readonly metrics: Metrics,
    private readonly settings: DispatcherSettings,
    private readonly wakes$: Observable<Wake>,
  ) {
    this.keys = look.keys;
  }

  /**
   * Quiet, waiting for a wake-up or its next look: when (performance.now())
   * that look comes, so that a parked queue's look is made then instead
   * (src/runtime/parked-looks.ts); undefined while it is not quiet.
   */
  quietUntilNextLook(): number | undefined {
    return this.quietNow && !this.lookWanted ? Math.min(this.dueAt, this.quietUntil) : undefined;
  }

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

  /** Nothing happened here for QUIET_AFTER_MS, nothing runs here, and wake-ups reach this instance: looks may wait. */
  private isQuiet(now: number): boolean {
    const quiet = this.settings.quiet;
    if (!quiet) return false;
    if (quiet.busy()) this.activeAt = now;
    return now - this.activeAt >= QUIET_AFTER_MS && quiet.listening();
  }

  private async loop(signal: AbortSignal): Promise<void> {
    const backoff = new OutageBackoff();
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
          const lookAt = Math.min(this.dueAt, quiet ? this.quietUntil : this.lastLookAt + this.look.pollIntervalMs);
          if (now < lookAt) {
            // Woken for the flow notices alone (a result here queued one), or to ask again.
            await flows?.ifPoked();
            // Not yet quiet, it asks again within pollIntervalMs (its queue becomes quiet by time passing).
            await this.wakeup.wait(quiet ? lookAt - now : Math.min(lookAt - now, this.look.pollIntervalMs));
            continue;
          }
        }
        this.lookWanted = false;
        this.lookIsCheck = false;
        this.quietNow = false;
        this.lastLookAt = now;
        const result = await dispatchOnce(this.look, this.scripts, this.metrics, () => signal.aborted);
        backoff.reset();
        if (signal.aborted) break;
        const moved = result.movedDue + result.movedExpired + result.handedToGroups;
        // A paused queue (readyWaiting -1) is not quiet: its looks come every pollIntervalMs, as before 0.6.
        if (moved > 0 || result.readyWaiting < 0) this.activeAt = performance.now();
        const quiet = this.isQuiet(performance.now());
        if (moved > 0) this.settings.onMoved?.();
        // Events wait unclaimed: readers here that are quiet (waiting for word alone) look (src/runtime/ready-reader.ts).
        else if (result.readyWaiting > 0) this.settings.onReadyWaiting?.();
        // A quiet queue's outbox is swept when poked: by a result here, or by the look every queue makes when an instance falls silent.
        await (quiet ? flows?.ifPoked() : flows?.afterLook());
        this.dueAt = 0;
        if (result.movedDue + result.movedExpired >= this.look.batchSize) continue;
        const untilNext = result.nextDue < 0 ? Infinity : Math.max(0, result.nextDue - result.now);
        const after = performance.now();
        this.dueAt = after + untilNext;
        this.quietUntil = after + quietLookIn(quietEveryMs(this.look));
        await this.wakeup.wait(Math.min(untilNext, this.look.pollIntervalMs));
      } catch {
        this.lookWanted = true;
        this.metrics.count(METRIC.redisErrors, { loop: 'dispatcher', type: this.keys.type });
        await sleep(backoff.next(), signal);
      }
    }
  }
}

/** What a look sends of this instance's registrations: only while it has named groups on the queue. */
function registrationsNow(look: DispatchLook): { newMarker: string; markerSeenBefore: boolean; groups: readonly string[] } | undefined {
  const registrations = look.registrations;
  const groups = registrations?.groups() ?? [];
  if (!registrations || !groups.some((g) => g !== DEFAULT_GROUP)) return undefined;
  return { newMarker: newMarkerValue(), markerSeenBefore: registrations.markerSeenBefore(), groups };
}

/** When a quiet look comes at the latest: named groups registered here keep the data-loss bound. */
export function quietEveryMs(look: DispatchLook): number {
  const registered = look.registrations?.groups().some((g) => g !== DEFAULT_GROUP) === true;
  return Math.max(look.pollIntervalMs, registered ? QUIET_LOOK_REGISTERED_MS : QUIET_LOOK_MS);
}

/**
 * One look: due events and expired leases to the ready list, the moves
 * counted, the queue's marker told. Stopped while the look ran, the marker is
 * not: that may send more (registering groups again).
 */
export async function dispatchOnce(look: DispatchLook, scripts: LuaScripts, metrics: Metrics, stopped: () => boolean): Promise<DispatchResult> {
  const result = await scripts.dispatchDue(look.keys, look.batchSize, look.defaultGroupHere, registrationsNow(look), look.keepDead);
  // Counted whatever happened meanwhile: they moved. (A parked queue woken during its look, by the wake-up the
  // look itself published, still counts what that look handed out.)
  const tags = { type: look.keys.type, group: look.keys.group };
  if (result.handedToGroups > 0) metrics.count(METRIC.dispatched, { ...tags, reason: 'due' }, result.handedToGroups);
  metrics.count(METRIC.dispatched, { ...tags, reason: 'due' }, result.movedDue);
  metrics.count(METRIC.dispatched, { ...tags, reason: 'lease-expired' }, result.movedExpired);
  if (!stopped() && result.marker !== '') look.registrations?.onMarker(result.marker);
  return result;
}
