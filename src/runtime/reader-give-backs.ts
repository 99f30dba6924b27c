import type { ClaimLog, ClaimedRef, LuaScripts } from '../redis/lua-scripts';
import type { TypeKeys } from '../redis/redis-layout';
import { METRIC, type Metrics } from './metrics';

/** Most events kept for a give-back that failed: twice a claim's most. */
const MAX_KEPT = 2_000;

/**
 * What a reader gives back to READY without spending an attempt, and keeps
 * giving back until Redis takes it: the events of a claim whose reply was
 * lost (lua/release-claim.lua), and events claimed ahead that will not start
 * here (lua/release-unstarted.lua). Both are fenced by the claim in Redis,
 * so giving back twice, or after a lease ran out, changes nothing.
 */
export class ReaderGiveBacks<E extends ClaimedRef> {
  /** A claim whose reply never came: its events are given back before the next claim. */
  private lostClaim: ClaimLog | undefined;
  /** Events claimed ahead whose give-back failed (an outage): given back once Redis answers, not when their leases run out. */
  private notGivenBack: E[] = [];

  constructor(
    private readonly keys: TypeKeys,
    private readonly scripts: LuaScripts,
    private readonly metrics: Metrics,
    /** Told when events went back to READY: other instances' quiet readers are told on the wake-up channel. */
    private readonly onGivenBack: () => void = () => {},
  ) {}

  /** Whether a give-back failed and waits for Redis. */
  get owed(): boolean {
    return this.notGivenBack.length > 0;
  }

  /** A claim whose reply was lost: Redis may have run it. */
  lost(claim: ClaimLog): void {
    this.lostClaim = claim;
  }

  /**
   * Gives back events claimed ahead that will not start here. If Redis cannot
   * take them now, the loop tries again before its next call, once Redis
   * answers; should the reader stop first, their leases expire and bring them
   * back instead (no attempt spent either way).
   */
  async unstarted(late: readonly E[]): Promise<void> {
    // Those whose give-back failed before go first: they have waited longest.
    const events = this.notGivenBack.length > 0 ? [...this.notGivenBack.splice(0), ...late] : late;
    if (events.length === 0) return;
    try {
      const released = await this.scripts.releaseUnstarted(this.keys, events);
      this.metrics.count(METRIC.claimsReleased, { type: this.keys.type, group: this.keys.group }, released);
      if (released > 0) this.onGivenBack();
    } catch {
      // Tried again before the next call (fenced by each claim: a lease that ran out meanwhile is left alone).
      this.notGivenBack = events.slice(0, MAX_KEPT);
      this.metrics.count(METRIC.redisErrors, { loop: 'reader', type: this.keys.type });
    }
  }

  /**
   * Gives back the events of the claim whose reply was lost, so they are
   * claimed again without waiting out their leases or spending an attempt.
   * False while Redis cannot be reached.
   */
  async lostClaimReleased(stop: AbortSignal): Promise<boolean> {
    const lost = this.lostClaim;
    if (!lost) return true;
    try {
      const released = await this.scripts.releaseClaim(this.keys, lost);
      this.lostClaim = undefined;
      this.metrics.count(METRIC.claimsReleased, { type: this.keys.type, group: this.keys.group }, released);
      if (released > 0) this.onGivenBack();
      return true;
    } catch {
      if (!stop.aborted) this.metrics.count(METRIC.redisErrors, { loop: 'reader', type: this.keys.type });
      return false;
    }
  }
}
