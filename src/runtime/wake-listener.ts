import { Observable, share } from 'rxjs';
import type { RedisConnections } from '../redis/redis-connections';

/** Tag of the wake-up sent when the subscription (re)starts: messages may have been missed, every dispatcher should look. */
export const WAKE_ALL = '*';

export interface Wake {
  /** The event type's key tag, or WAKE_ALL. */
  readonly tag: string;
  /** The new earliest due time, Redis clock. */
  readonly due: number;
}

/**
 * Wake-ups published by enqueue and replay when they schedule something earlier
 * than anything waiting. One subscriber connection serves every dispatcher and
 * exists only while one listens. A lost message only costs latency: dispatchers
 * also poll.
 */
export function wakeListener(connections: RedisConnections, channel: string): Observable<Wake> {
  return new Observable<Wake>((subscriber) => {
    const connection = connections.duplicate();
    connection.on('message', (from: string, message: string) => {
      if (from !== channel) return;
      const cut = message.lastIndexOf('|');
      subscriber.next({ tag: message.slice(0, cut), due: Number(message.slice(cut + 1)) });
    });
    // ioredis re-subscribes by itself after a reconnect; whatever was published
    // while we were not subscribed is caught by a look at every type.
    const lookEverywhere = () => subscriber.next({ tag: WAKE_ALL, due: 0 });
    connection.on('ready', lookEverywhere);
    connection.subscribe(channel).then(lookEverywhere, () => undefined);
    return () => connections.release(connection);
  }).pipe(share());
}
