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
  /** Publishes this instance's beacon; a failure is ignored (an outage drops the subscription too). */
  readonly announce: () => Promise<void>;
  readonly wakes$: Observable<Wake>;
  /** Whether the subscription is confirmed: while it is not, nothing heard says anything. */
  readonly listening: () => boolean;
  /** An instance went silent: look at every queue. */
  readonly onLapse: () => void;
}

/**
 * Liveness without a key (since 0.6): each instance that handles events
 * publishes a beacon every BEACON_EVERY_MS, and notes the others'. One that
 * falls silent (crashed, cut off, stopped) may have left leases to expire,
 * retries and flow notices nobody else knows the time of, while the queues
 * here wait quietly (src/runtime/quiet-looks.ts): every queue here then looks,
 * and its look says when those fall due. A false alarm (a long pause of that
 * instance) costs one look per queue. Instances of 0.5 send none; their
 * leases are seen by the quiet looks.
 */
export class InstanceBeacon implements BackgroundService {
  private readonly heard = new Map<string, number>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private subscription: Subscription | undefined;

  constructor(private readonly parts: BeaconParts) {}

  start(): void {
    if (this.timer) return;
    const own = BEACON_TAG + this.parts.instanceId;
    this.subscription = this.parts.wakes$.subscribe((wake) => {
      if (wake.tag.startsWith(BEACON_TAG) && wake.tag !== own) this.heard.set(wake.tag, performance.now());
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

  private beat(): void {
    this.parts.announce().catch(() => undefined);
    const now = performance.now();
    if (!this.parts.listening()) {
      // Deaf for now: silence says nothing; the look at every queue when the subscription is back covers it.
      for (const tag of this.heard.keys()) this.heard.set(tag, now);
      return;
    }
    let lapsed = false;
    for (const [tag, at] of this.heard) {
      if (now - at < BEACON_LAPSE_MS) continue;
      this.heard.delete(tag);
      lapsed = true;
    }
    if (lapsed) this.parts.onLapse();
  }
}
