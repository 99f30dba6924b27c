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
  /** Publishes this instance's beacon number `seq`, on the connection its handlers use; a failure is ignored. */
  readonly announce: (seq: number) => Promise<void>;
  readonly wakes$: Observable<Wake>;
  /** Whether the wake-up subscription says it is confirmed. */
  readonly listening: () => boolean;
  /** An instance went silent (its leases, retries and notices), or one of this one's beacons that Redis took never came back (`missed`: readers look too). */
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
 * again (within BEACON_LAPSE_MS) nothing here is quiet. The beacons are
 * numbered: one that Redis took (its PUBLISH answered) and that never came
 * back says wake-ups were lost, and every queue and reader here looks. A
 * pause of this process or of Redis delays them and loses none: no look.
 */
export class InstanceBeacon implements BackgroundService {
  private readonly heard = new Map<string, number>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private subscription: Subscription | undefined;
  private ownHeardAt = Number.NEGATIVE_INFINITY;
  private wasHearing = false;
  private lastBeatAt = 0;
  private seq = 0;
  /** Own beacons Redis took and that have not come back yet; the last number heard. */
  private readonly taken = new Set<number>();
  private lastHeardSeq = -1;

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
      else this.heardOwn(wake.due, now);
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

  /** Its own beacon `seq` came back: a missing one before it, that Redis took, was lost on the way. */
  private heardOwn(seq: number, now: number): void {
    this.ownHeardAt = now;
    let lost = false;
    for (const taken of this.taken) {
      if (taken > seq) continue;
      this.taken.delete(taken);
      if (taken !== seq && taken > this.lastHeardSeq) lost = true;
    }
    this.lastHeardSeq = Math.max(this.lastHeardSeq, seq);
    this.noteHearing(now);
    if (lost) this.parts.lookEverywhere(true);
  }

  /** Tells when hearing is lost: queues stop being quiet (they become so again by time passing once it is back). */
  private noteHearing(now: number): void {
    const hearing = this.hearing(now);
    if (hearing === this.wasHearing) return;
    this.wasHearing = hearing;
    if (!hearing) this.parts.deaf();
  }

  private beat(): void {
    const seq = ++this.seq;
    this.parts.announce(seq).then(
      () => {
        // Taken by Redis and not heard yet (a reply may come after the message itself).
        if (seq <= this.lastHeardSeq) return;
        this.taken.add(seq);
        // Deaf for long (a refused subscription): the oldest go; any one left still tells of the loss.
        if (this.taken.size > 64) this.taken.delete(this.taken.values().next().value as number);
      },
      () => undefined,
    );
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
