import { Observable } from 'rxjs';
import type { ClaimedRecord, LuaScripts, RedisClient } from './lua-scripts';
import { METRIC, type Metrics } from './metrics';
import { OutageBackoff, sleep } from './outage-backoff';
import type { RedisConnections } from './redis-connections';
import type { TypeKeys } from './redis-layout';
import type { HandlerSlots } from './handler-slots';

export interface ReaderSettings {
  readonly leaseMs: number;
  readonly maxAttempts: number;
  /** How long one blocking wait lasts in Redis. */
  readonly blockMs: number;
  /** How much longer than blockMs a blocking call may take before its connection is presumed dead. */
  readonly watchdogGraceMs: number;
}

export interface ClaimedEvent extends ClaimedRecord {
  /** Redis clock when the event was claimed; with dueAt it gives lateness free of host clock skew. */
  readonly claimedAt: number;
}

/**
 * The hot stream of one type's ready events, claimed only as fast as handler
 * slots free up. When the ready list is empty it blocks in Redis on its own
 * connection, which a watchdog replaces if a call outlives its timeout
 * (a half-open socket after a network fault would otherwise block forever).
 */
export class ReadyReader {
  private blocking: RedisClient | undefined;

  constructor(
    private readonly keys: TypeKeys,
    private readonly scripts: LuaScripts,
    private readonly connections: RedisConnections,
    private readonly metrics: Metrics,
    private readonly settings: ReaderSettings,
  ) {}

  /** Emits claimed events until `stop` aborts, then completes; each emitted event has taken a slot. */
  claimed$(slots: HandlerSlots, stop: AbortSignal): Observable<ClaimedEvent> {
    return new Observable<ClaimedEvent>((subscriber) => {
      const tags = { type: this.keys.tag };
      const backoff = new OutageBackoff();
      const loop = async () => {
        while (!stop.aborted && !subscriber.closed) {
          await slots.whenFree(stop);
          if (stop.aborted) break;
          try {
            const result = await this.scripts.claimReady(this.keys, slots.free, this.settings.leaseMs, this.settings.maxAttempts);
            backoff.reset();
            for (const dead of result.deadLettered) {
              this.metrics.count(METRIC.deadLettered, { ...tags, reason: 'lease-expired' });
            }
            if (result.claimed.length > 0) {
              slots.take(result.claimed.length);
              this.metrics.count(METRIC.events, { ...tags, direction: 'dequeue' }, result.claimed.length);
              // Events already claimed are handed on even if stop aborted meanwhile: their leases are ours.
              for (const record of result.claimed) subscriber.next({ ...record, claimedAt: result.now });
            } else if (result.deadLettered.length === 0) {
              await this.waitForReady(stop);
            }
          } catch {
            if (stop.aborted) break;
            this.metrics.count(METRIC.redisErrors, { loop: 'reader', ...tags });
            await sleep(backoff.next(), stop);
          }
        }
        this.dropBlockingConnection();
        subscriber.complete();
      };
      void loop();
      return () => this.dropBlockingConnection();
    });
  }

  /**
   * Blocks until the ready list holds something. BLMOVE from the list to its own
   * head leaves the list as it was, so the event is still claimed atomically by
   * claim-ready.lua and a crash here loses nothing.
   */
  private async waitForReady(stop: AbortSignal): Promise<void> {
    const connection = (this.blocking ??= this.connections.duplicate());
    const onStop = () => this.dropBlockingConnection();
    stop.addEventListener('abort', onStop, { once: true });
    let watchdog: NodeJS.Timeout | undefined;
    const watchdogFired = new Promise<'watchdog'>((resolve) => {
      watchdog = setTimeout(() => resolve('watchdog'), this.settings.blockMs + this.settings.watchdogGraceMs);
    });
    try {
      const outcome = await Promise.race([connection.blmove(this.keys.ready, this.keys.ready, 'LEFT', 'LEFT', this.settings.blockMs / 1000), watchdogFired]);
      if (outcome === 'watchdog') {
        this.metrics.count(METRIC.watchdogResets, { type: this.keys.tag });
        this.dropBlockingConnection();
      }
    } finally {
      clearTimeout(watchdog);
      stop.removeEventListener('abort', onStop);
    }
  }

  private dropBlockingConnection(): void {
    if (this.blocking) this.connections.release(this.blocking);
    this.blocking = undefined;
  }
}
