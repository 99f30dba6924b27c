import type { DelayedEventInstance, EventClass } from '../core/delayed-event.decorator';
import type { EventCodec } from '../core/event-codec';
import { type StoredLimits, storeLimits } from '../redis/flow-limits';
import type { LuaScripts } from '../redis/lua-scripts';
import type { RedisConnections } from '../redis/redis-connections';
import type { TypeKeys } from '../redis/redis-layout';
import { METRIC, type Metrics } from '../runtime/metrics';
import type { Errands } from '../runtime/background-service';
import { OutageBackoff } from '../runtime/outage-backoff';
import type { ServiceLog } from '../runtime/service-log';
import { createHash } from 'node:crypto';
import { keyOf } from './flow-control';

/** What storing a handler's limits needs of the service. */
export interface LimitsParts {
  readonly scripts: LuaScripts;
  readonly connections: RedisConnections;
  readonly metrics: Metrics;
  readonly log: ServiceLog;
  /** Where the attempts run: once stopped, none is sent and the wait for one resolves. */
  readonly errands: Errands;
}

/**
 * Stores the limits a handler enforces on a queue, where every instance's
 * claims read them: the handler registered last sets them. One that changes
 * what another instance set is said in the log (a deploy changing a limit,
 * or instances started with different ones). Retried through an outage;
 * resolves once stored, or once the errands stop (the service closes).
 */
export function storeLimitsWhenReady(parts: LimitsParts, keys: TypeKeys, limits: StoredLimits): Promise<void> {
  const backoff = new OutageBackoff();
  const { errands } = parts;
  return new Promise<void>((resolve) => {
    if (errands.stopped) return resolve();
    // Forgotten once stored: a handler stores its limits again every minute.
    const forget = errands.onStop(resolve);
    const stored = () => {
      forget();
      resolve();
    };
    const attempt = (): void =>
      errands.run(() =>
        (parts.scripts.gate.wait() ?? Promise.resolve())
          // The wait for a connection may outlast close(): nothing is sent after it.
          .then(() => parts.scripts.bounded('store-limits', () => (errands.stopped ? Promise.resolve(undefined) : storeLimits(parts.connections.command, keys, limits))))
          .then(
            (before) => {
              if (before && (before.rate || before.concurrency !== undefined || before.perKey)) {
                parts.log.limitsChanged({ type: keys.type, group: keys.group, queue: keys.queueTag, before, now: limits });
              }
              stored();
            },
            () => {
              parts.metrics.count(METRIC.redisErrors, { loop: 'connection', type: keys.type });
              errands.after(backoff.next(), attempt);
            },
          ),
      );
    attempt();
  });
}

/**
 * The key of each event at the head of a ready list, for a handler that
 * shares capacity per key (HandlerOptions.key): its body decoded, the key
 * function asked (user code, contained). An event that cannot be decoded
 * goes under '' and is dead-lettered by its claim, as any other.
 */
export function keySorter<T extends DelayedEventInstance>(eventClass: EventClass<T>, key: (event: T) => unknown, codec: EventCodec) {
  const digest = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 32);
  return (events: ReadonlyArray<{ readonly id: string; readonly body: string }>): Array<{ id: string; key: string }> =>
    events.map(({ id, body }) => {
      let sorted = '';
      try {
        sorted = keyOf(key, codec.decode(eventClass, id, body).event, digest);
      } catch {
        // Undecodable: the key ''.
      }
      return { id, key: sorted };
    });
}
