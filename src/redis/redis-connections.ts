import { Cluster, Redis } from 'ioredis';
import type { RedisClient } from './redis-client';

/** Redis's answer to SELECT of a database it does not have. */
const DATABASE_REFUSED = /^ERR (DB index is out of range|invalid DB index)/;

/**
 * The URL selects a database Redis does not have: the service's connections
 * stopped for good. Kept as the reason calls fail (src/redis/ready-gate.ts),
 * over the errors of the connections' own closing that follow it.
 */
export class DatabaseRefusedError extends Error {}

/**
 * Owns the connections the service opens. A client handed in by the user stays
 * the user's: we duplicate it for blocking reads and pub/sub, and never quit it.
 */
export class RedisConnections {
  readonly command: RedisClient;
  private readonly owned = new Set<RedisClient>();
  private handlingConnection: RedisClient | undefined;
  /** Redis refused the database the URL names: no connection of the service may go on (in database 0). */
  private databaseRefused = false;

  constructor(
    source: string | RedisClient,
    private readonly onError: (error: Error) => void,
  ) {
    if (typeof source === 'string') {
      // Never re-send a command after a reconnect: Redis may have run it and lost
      // only the reply, and an enqueue or a claim must not take effect twice.
      // No offline queue either: a call made while the connection is down would
      // wait there and be sent on reconnect, after its caller was told it failed.
      // Calls wait for a ready connection instead (src/redis/ready-gate.ts), unsent.
      this.command = this.own(new Redis(source, { autoResendUnfulfilledCommands: false, enableOfflineQueue: false }));
    } else {
      this.command = source;
    }
  }

  /** Whether the command connection was opened by the service (from a URL), not handed in. */
  get ownsCommandConnection(): boolean {
    return this.owned.has(this.command);
  }

  /**
   * Forces the command connection to reconnect, when it is ours: a half-open
   * socket (network cut without a reset) is otherwise only noticed by TCP
   * keepalive, minutes later. A client the user passed in is left alone.
   */
  resetCommandConnection(): void {
    if (this.owned.has(this.command) && this.command.status === 'ready') this.command.disconnect(true);
  }

  /**
   * The connection of the handlers' loops (dispatch, claims, results), opened
   * with the first handler: on the command connection their calls would queue
   * behind a burst of enqueues, and events due meanwhile would wait for all of
   * them to be stored. Always the service's own, even when the command
   * connection was handed in.
   */
  get handling(): RedisClient {
    return (this.handlingConnection ??= this.duplicate());
  }

  /** Forces the handlers' connection to reconnect (see resetCommandConnection). */
  resetHandlingConnection(): void {
    if (this.handlingConnection?.status === 'ready') this.handlingConnection.disconnect(true);
  }

  /** A new connection with the same settings, for the handlers' loops. */
  duplicate(): RedisClient {
    const source = this.command;
    return this.own(source instanceof Cluster ? source.duplicate() : source.duplicate());
  }

  /**
   * A new connection for a blocking reader or a subscriber: these change
   * nothing, so their calls may wait in an offline queue for the connection
   * to come back, as a subscription must.
   */
  duplicateForWaiting(): RedisClient {
    const source = this.command;
    return this.own(source instanceof Cluster ? source.duplicate() : source.duplicate({ enableOfflineQueue: true }));
  }

  /** Drops a connection at once: pending commands reject, a blocked command stops blocking. */
  release(client: RedisClient): void {
    this.owned.delete(client);
    client.disconnect();
  }

  async close(): Promise<void> {
    this.handlingConnection = undefined;
    const clients = [...this.owned];
    this.owned.clear();
    await Promise.all(
      clients.map(async (client) => {
        try {
          await Promise.race([client.quit(), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
        } catch {
          // quit fails when the connection is already down; disconnect below covers it.
        }
        client.disconnect();
      }),
    );
  }

  private own<C extends RedisClient>(client: C): C {
    // Without a listener ioredis prints every reconnect failure; the loops report outages as metrics instead.
    client.on('error', this.onError);
    // ioredis answers a refused SELECT (a database Redis does not have) by going on in database 0:
    // writing another application's keys. Every connection of the service stops instead, those opened
    // later too (the handlers' one, a subscriber); calls fail, and the error says why.
    client.on('error', (error: Error) => {
      if (!DATABASE_REFUSED.test(error.message)) return;
      this.databaseRefused = true;
      for (const owned of this.owned) owned.disconnect();
      // Said again in words that name the database: calls waiting for the connection fail with it.
      const db = client instanceof Redis ? client.options.db : undefined;
      client.emit('error', new DatabaseRefusedError(`Redis has no database ${db ?? '(as selected)'} (${error.message}): the URL selects it; no connection of the service goes on`));
    });
    this.owned.add(client);
    if (this.databaseRefused) client.disconnect();
    return client;
  }
}
