import type { LuaScripts } from '../redis/lua-scripts';
import type { TypeKeys } from '../redis/redis-layout';
import type { HandlerDelivery } from './handler-invocation';
import { METRIC, type Metrics } from './metrics';

/** A claim a call runs (or a batch call gathers) under: what lua/renew-leases.lua names. */
export interface KeptClaim {
  readonly id: string;
  readonly claim: number;
  readonly keys: TypeKeys;
  /** When (performance.now()) the claim's reply came: its heartbeat lease started a little before. */
  readonly arrivedAt: number;
}

interface Kept {
  readonly delivery: HandlerDelivery;
  /** When (performance.now()) the last renewal that reached Redis was sent; the lease lapses leaseMs after that at the latest. */
  renewedAt: number;
  /** Its result is being written: a lease that ends now ended by that result, not lost. */
  ending: boolean;
}

/** Renewals per script call: few enough for one Lua unpack and a short script. */
const RENEW_STEP = 1_000;

/**
 * Heartbeats (since 0.6): every `heartbeatMs`, renews the heartbeat leases of
 * the calls one consumer runs, per queue in one script call
 * (lua/renew-leases.lua). A call whose lease is no longer its claim's, or
 * whose lease this instance could not renew before it may have lapsed (Redis
 * out of reach, the event loop stalled), is given up: its `delivery.signal`
 * aborts with `lease-lost`, as the event may run elsewhere now. At shutdown,
 * abandon() gives up the calls still running: their leases are marked not
 * started and left to lapse, so their events come back with their attempts
 * unspent.
 */
export class LeaseKeeper {
  private readonly kept = new Map<KeptClaim, Kept>();
  private timer: NodeJS.Timeout | undefined;
  private beating = false;
  private stopped = false;

  constructor(
    private readonly scripts: LuaScripts,
    private readonly metrics: Metrics,
    private readonly tags: { readonly type: string; readonly group: string },
    /** How often to renew (ms). */
    private readonly heartbeatMs: number,
    /** How long a renewal keeps a lease (ms). */
    private readonly leaseMs: number,
  ) {}

  /** A call starts (or a batch call gathers it): its lease is renewed until release(). */
  hold(claim: KeptClaim, delivery: HandlerDelivery): void {
    if (this.stopped) return;
    this.kept.set(claim, { delivery, renewedAt: claim.arrivedAt, ending: false });
    if (this.heartbeatMs > 0) this.timer ??= setInterval(() => void this.beat(), this.heartbeatMs).unref();
  }

  /** Its call ended and its result is being written: still renewed (the write may wait out an outage), never given up. */
  ending(claim: KeptClaim): void {
    const kept = this.kept.get(claim);
    if (kept) kept.ending = true;
  }

  /** Its result is written (or it will not run): no more renewals. */
  release(claim: KeptClaim): void {
    this.kept.delete(claim);
  }

  /** Stops renewing; the calls still kept are given up with `shutdown` and their leases marked not started. */
  async abandon(): Promise<void> {
    this.stop();
    const left = [...this.kept];
    this.kept.clear();
    if (left.length === 0) return;
    for (const [, kept] of left) kept.delivery.abort('shutdown', 'close() stopped waiting for this call (closeTimeoutMs); its event comes back, its attempt unspent, once its lease lapses');
    this.metrics.count(METRIC.callsAbandoned, { ...this.tags, reason: 'shutdown' }, left.length);
    // Best effort: a lease left started spends the attempt when it lapses, as a crash would.
    await Promise.allSettled([...this.byQueue(left.map(([claim]) => claim))].map(([keys, claims]) => this.renew(keys, claims, true)));
  }

  /** Stops renewing (close, with every call ended). */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private async beat(): Promise<void> {
    // Every tick, a renewal under way or not: a call whose lease may have lapsed is given up now, not when a hung renewal fails.
    const now = performance.now();
    this.giveUp([...this.kept].filter(([, kept]) => now - kept.renewedAt >= this.leaseMs - this.heartbeatMs / 2).map(([claim]) => claim));
    if (this.beating || this.kept.size === 0) return;
    this.beating = true;
    try {
      await Promise.all([...this.byQueue([...this.kept.keys()])].map(([keys, claims]) => this.renewQueue(keys, claims)));
    } finally {
      this.beating = false;
    }
  }

  private async renewQueue(keys: TypeKeys, claims: KeptClaim[]): Promise<void> {
    const sentAt = performance.now();
    let lost: KeptClaim[];
    try {
      lost = await this.renew(keys, claims, false);
      for (const claim of claims) {
        const kept = this.kept.get(claim);
        if (kept) kept.renewedAt = sentAt;
      }
    } catch {
      // Not renewed: the next ticks give the calls up once their leases may have lapsed (half a heartbeat of margin).
      this.metrics.count(METRIC.redisErrors, { loop: 'heartbeat', type: this.tags.type });
      return;
    }
    this.giveUp(lost);
  }

  /** Aborts the calls whose leases are lost (lease-lost), but not those their own result ended. */
  private giveUp(lost: readonly KeptClaim[]): void {
    let given = 0;
    for (const claim of lost) {
      const kept = this.kept.get(claim);
      if (!kept) continue;
      this.kept.delete(claim);
      if (kept.ending) continue;
      kept.delivery.abort(
        'lease-lost',
        "this call's lease is gone: its instance could not renew it in time, or the event was cancelled, replaced or handed out again meanwhile; it may run elsewhere, and this call's result changes nothing",
      );
      given++;
    }
    if (given > 0) this.metrics.count(METRIC.callsAbandoned, { ...this.tags, reason: 'lease-lost' }, given);
  }

  /** Renews (or, abandoning, marks not started) the leases of `claims`; resolves those no longer theirs. */
  private async renew(keys: TypeKeys, claims: readonly KeptClaim[], abandon: boolean): Promise<KeptClaim[]> {
    const lost: KeptClaim[] = [];
    for (let from = 0; from < claims.length; from += RENEW_STEP) {
      const step = claims.slice(from, from + RENEW_STEP);
      const reply = await this.scripts.call('renew-leases', keys, { leaseMs: this.leaseMs, abandon, events: step.map((c) => ({ id: c.id, claim: c.claim })) });
      for (const position of reply.lost) lost.push(step[position - 1]!);
    }
    return lost;
  }

  private byQueue(claims: readonly KeptClaim[]): Map<TypeKeys, KeptClaim[]> {
    const queues = new Map<TypeKeys, KeptClaim[]>();
    for (const claim of claims) {
      const list = queues.get(claim.keys);
      if (list) list.push(claim);
      else queues.set(claim.keys, [claim]);
    }
    return queues;
  }
}
