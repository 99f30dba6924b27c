import { Observable, Subject, type Subscriber, share, takeUntil } from 'rxjs';
import type { RedisClient } from '../redis/redis-client';
import type { RedisConnections } from '../redis/redis-connections';
import type { BackgroundService } from './background-service';

/** Tag of the wake-up sent when the subscription (re)starts: messages may have been missed, every dispatcher should look. */
export const WAKE_ALL = '*';

/** Tag of what is told here (never published) when the subscription is lost: quiet dispatchers stop being quiet. */
export const WAKE_LOST = '#lost';

export interface Wake {
  /** The event type's key tag, or WAKE_ALL. */
  readonly tag: string;
  /** The new earliest due time, Redis clock. */
  readonly due: number;
}

export interface WakeListenerSettings {
  /** How often the subscriber connection is asked for a PING. */
  readonly pingEveryMs: number;
  /** How long a PING may go unanswered before the connection is presumed dead and replaced. */
  readonly pingTimeoutMs: number;
  /** Told each time a silent connection was replaced. */
  readonly onReset: () => void;
  /** Told when Redis refuses the subscription (ACL): wake-ups are lost, dispatchers only poll. */
  readonly onRefused?: (error: Error) => void;
}

/**
 * Wake-ups published by enqueue and replay when they schedule something earlier
 * than anything waiting. One subscriber connection serves every dispatcher and
 * exists only while one listens. A lost message only costs latency: dispatchers
 * also poll. A subscriber only listens, so a half-open connection (a network cut
 * that sends no reset) would stay silent for good: a PING that goes unanswered
 * replaces it. Once stopped, it ends its subscribers and opens no connection
 * again, a probe still waiting included.
 */
export class WakeListener implements BackgroundService {
  readonly wakes$: Observable<Wake>;
  private readonly stopping = new Subject<void>();
  private stopped = false;
  private subscribed = false;

  constructor(connections: RedisConnections, channel: string, settings: WakeListenerSettings) {
    const listening = new Observable<Wake>((subscriber) => {
      if (this.stopped) return subscriber.complete();
      const teardown = listen(connections, channel, settings, subscriber, (up) => {
        this.subscribed = up;
      });
      return () => {
        this.subscribed = false;
        teardown();
      };
    });
    this.wakes$ = listening.pipe(takeUntil(this.stopping), share());
  }

  /**
   * Whether the subscription is confirmed now: what is published reaches this
   * instance. False before the first SUBSCRIBE is answered, from a connection's
   * loss until ioredis has it again, and for good once refused (src/runtime/quiet-looks.ts).
   */
  listening(): boolean {
    return this.subscribed;
  }

  /** It listens from its first subscriber on: nothing to start. */
  start(): void {}

  /** Ends every subscription: the subscriber connection is released, and none is opened after. */
  stop(): Promise<void> {
    this.stopped = true;
    this.stopping.next();
    return Promise.resolve();
  }
}

function listen(connections: RedisConnections, channel: string, settings: WakeListenerSettings, subscriber: Subscriber<Wake>, setUp: (up: boolean) => void): () => void {
  // ioredis re-subscribes by itself after a reconnect; whatever was published
  // while we were not subscribed is caught by a look at every type.
  const lookEverywhere = () => subscriber.next({ tag: WAKE_ALL, due: 0 });
  let confirmed = false;
  const open = (): RedisClient => {
    const connection = connections.duplicateForWaiting();
    connection.on('message', (from: string, message: string) => {
      if (from !== channel) return;
      const cut = message.lastIndexOf('|');
      subscriber.next({ tag: message.slice(0, cut), due: Number(message.slice(cut + 1)) });
    });
    connection.on('ready', () => {
      // Up again, re-subscribed by ioredis on this connection before anything else it sends.
      if (confirmed && connection === current) setUp(true);
      lookEverywhere();
    });
    for (const lost of ['close', 'reconnecting', 'end'])
      connection.on(lost, () => {
        if (connection !== current) return;
        setUp(false);
        subscriber.next({ tag: WAKE_LOST, due: 0 });
      });
    connection.subscribe(channel).then(
      () => {
        if (connection !== current) return;
        confirmed = true;
        setUp(true);
        lookEverywhere();
      },
      (error: unknown) => {
        // Refused (an ACL without +subscribe or the channel): dispatchers still poll every pollIntervalMs.
        if (error instanceof Error && /^NOPERM\b/.test(error.message)) settings.onRefused?.(error);
      },
    );
    return connection;
  };
  let current: RedisClient | undefined;
  let connection = (current = open());
  let probing = false;
  /** Set at teardown: a probe still waiting must not open a new connection after it. */
  let torn = false;
  const watchdog = setInterval(() => {
    // Only a connection that says it is up is probed: one reconnecting is ioredis's to mend.
    if (probing || connection.status !== 'ready') return;
    probing = true;
    const probed = connection;
    let answered = false;
    const timeout = setTimeout(() => {
      probing = false;
      if (torn || answered || probed !== connection) return;
      setUp(false);
      subscriber.next({ tag: WAKE_LOST, due: 0 });
      confirmed = false;
      connections.release(probed);
      connection = current = open();
      settings.onReset();
    }, settings.pingTimeoutMs);
    timeout.unref();
    probed.ping().then(
      () => {
        answered = true;
        probing = false;
        clearTimeout(timeout);
      },
      () => undefined,
    );
  }, settings.pingEveryMs);
  watchdog.unref();
  return () => {
    torn = true;
    clearInterval(watchdog);
    connections.release(connection);
  };
}
