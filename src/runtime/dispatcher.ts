import type { Observable } from 'rxjs';
import { type BackgroundService, LoopService } from './background-service';
import { type DeadRetention, type LuaScripts, newMarkerValue } from '../redis/lua-scripts';
import { METRIC, type Metrics } from './metrics';
import { OutageBackoff, sleep } from './outage-backoff';
import { DEFAULT_GROUP, type TypeKeys } from '../redis/redis-layout';
import { WAKE_ALL, type Wake } from './wake-listener';
import { Wakeup } from './wakeup';

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
  readonly flows?: { afterLook(): Promise<void> };
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
    this.wakeup.wake();
  }

  /** A flow notice waits in the queue's outbox (since 0.6): apply it now, without a look if none is due yet. */
  nudgeFlows(): void {
    this.wakeup.wake();
  }

  /** A look is asked for (a nudge, a wake-up), or due by performance.now() `nextLookAt`; else a wake is for the flow notices alone. */
  private lookWanted = true;
  private nextLookAt = 0;

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
      if (wake.due >= 0 && (wake.tag === this.keys.tag || wake.tag === WAKE_ALL)) this.nudge();
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

  private async loop(signal: AbortSignal): Promise<void> {
    const backoff = new OutageBackoff();
    const tags = { type: this.keys.type, group: this.keys.group };
    while (!signal.aborted) {
      // Whatever woke us before this look, the look itself will see.
      this.wakeup.clear();
      try {
        const flows = this.settings.flows;
        if (flows && !this.lookWanted && performance.now() < this.nextLookAt) {
          await flows.afterLook();
          await this.wakeup.wait(Math.max(0, this.nextLookAt - performance.now()));
          continue;
        }
        this.lookWanted = false;
        const result = await this.scripts.dispatchDue(this.keys, this.settings.batchSize, this.settings.defaultGroupHere, this.registrationsNow(), this.settings.keepDead);
        backoff.reset();
        // Stopped while the look ran: what it reports may send more (registering groups again); nothing is sent now.
        if (signal.aborted) break;
        if (result.marker !== '') this.settings.registrations?.onMarker(result.marker);
        if (result.handedToGroups > 0) this.metrics.count(METRIC.dispatched, { ...tags, reason: 'due' }, result.handedToGroups);
        if (result.movedDue + result.movedExpired + result.handedToGroups > 0) this.settings.onMoved?.();
        this.metrics.count(METRIC.dispatched, { ...tags, reason: 'due' }, result.movedDue);
        this.metrics.count(METRIC.dispatched, { ...tags, reason: 'lease-expired' }, result.movedExpired);
        await this.settings.flows?.afterLook();
        this.nextLookAt = 0;
        if (result.movedDue + result.movedExpired >= this.settings.batchSize) continue;
        const untilNext = result.nextDue < 0 ? Infinity : result.nextDue - result.now;
        const waitMs = Math.max(0, Math.min(untilNext, this.settings.pollIntervalMs));
        this.nextLookAt = performance.now() + waitMs;
        await this.wakeup.wait(waitMs);
      } catch {
        this.lookWanted = true;
        this.metrics.count(METRIC.redisErrors, { loop: 'dispatcher', type: this.keys.type });
        await sleep(backoff.next(), signal);
      }
    }
  }
}
