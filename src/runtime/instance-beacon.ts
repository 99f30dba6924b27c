import type { Observable, Subscription } from 'rxjs';
import type { BackgroundService } from './background-service';
import type { Wake } from './wake-listener';
import { BEACON_TAG } from '../redis/instance-registry';

/** How often an instance that handles events says it is alive on the wake-up channel. */
export const BEACON_EVERY_MS = 1_000;

/** An instance not heard for this long is taken for gone: every queue here looks (its leases, its flow notices). */
export const BEACON_LAPSE_MS = 3_000;

export interface BeaconParts {
  readonly instanceId: string;
  /** Publishes this instance's beacon, on the connection its handlers use; a failure is ignored. */
  readonly announce: () => Promise<void>;
  readonly wakes$: Observable<Wake>;
  /** Whether the wake-up subscription says it is confirmed. */
  readonly listening: () => boolean;
  /** An instance went silent (its leases, retries and notices), or this one hears again after a gap (`missed`: readers look too). */
  readonly lookEverywhere: (missed: boolean) => void;
  /** This instance stopped hearing its own beacon: its quiet queues stop being quiet. */
  readonly deaf: () => void;
}

/**
 * Liveness without a key (since 0.6): each instance that handles events
 * publishes a beacon every BEACON_EVERY_MS, and notes the others'. One that
 * falls silent (crashed, cut off, stopped) may have left leases to expire,
 * retries and flow notices nobody else knows the time of, while the queues
 * here wait quietly (src/runtime/quiet-looks.ts): every queue here then looks,
 * and its look says when those fall due. A false alarm costs one look per
 * queue. Instances of 0.5 send none; their leases are seen by the quiet looks.
 *
 * Its own beacon coming back is the proof that wake-ups reach this instance
 * end to end: a subscription ioredis moved to another node of a Cluster
 * without a word, or a half-open connection, stops it. Until it is heard
 * again (within BEACON_LAPSE_MS) nothing here is quiet, and when it is, every
 * queue looks, for what was published meanwhile.
 */
export class InstanceBeacon implements BackgroundService {
  private readonly heard = new Map<string, number>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private subscription: Subscription | undefined;
  private ownHeardAt = Number.NEGATIVE_INFINITY;
  private wasHearing = false;
  private lastBeatAt = 0;

  constructor(private readonly parts: BeaconParts) {}

  /** Whether wake-ups reach this instance: its subscription is confirmed and its own beacon came back lately. */
  hearing(now = performance.now()): boolean {
    return this.parts.listening() && now - this.ownHeardAt < BEACON_LAPSE_MS;
  }

  start(): void {
    if (this.timer) return;
    const own = BEACON_TAG + this.parts.instanceId;
    this.subscription = this.parts.wakes$.subscribe((wake) => {
      if (!wake.tag.startsWith(BEACON_TAG)) return;
      const now = performance.now();
      if (wake.tag !== own) this.heard.set(wake.tag, now);
      else {
        this.ownHeardAt = now;
        this.noteHearing(now);
      }
    });
    this.timer = setInterval(() => this.beat(), BEACON_EVERY_MS);
    this.timer.unref();
    this.beat();
  }

  stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.subscription?.unsubscribe();
    this.heard.clear();
    return Promise.resolve();
  }

  /** Tells of a change in hearing: back after a gap (look everywhere), or lost (queues stop being quiet). */
  private noteHearing(now: number): void {
    const hearing = this.hearing(now);
    if (hearing === this.wasHearing) return;
    this.wasHearing = hearing;
    if (hearing) this.parts.lookEverywhere(true);
    else this.parts.deaf();
  }

  private beat(): void {
    this.parts.announce().catch(() => undefined);
    const now = performance.now();
    const stalled = now - this.lastBeatAt > 2 * BEACON_EVERY_MS;
    this.lastBeatAt = now;
    this.noteHearing(now);
    if (stalled || !this.hearing(now)) {
      // Deaf, or this process was paused: silence says nothing of the others now; the look at every queue
      // when hearing comes back covers what it missed.
      for (const tag of this.heard.keys()) this.heard.set(tag, now);
      return;
    }
    let lapsed = false;
    for (const [tag, at] of this.heard) {
      if (now - at < BEACON_LAPSE_MS) continue;
      this.heard.delete(tag);
      lapsed = true;
    }
    if (lapsed) this.parts.lookEverywhere(false);
  }
}
