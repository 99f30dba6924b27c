/**
 * The one place that knows the Redis key layout (docs/redis-layout.md explains it).
 *
 * Every key of one event type carries the hash tag `{type}`, so every script
 * touches a single hash slot and the service runs unchanged on Redis Cluster.
 * The type lives in the key, not in every member, to keep per-event memory low.
 */
export interface TypeKeys {
  /** Hash: id -> envelope `attempt|due|body`. */
  readonly meta: string;
  /** Sorted set: id -> due ms. State SCHEDULED. */
  readonly schedule: string;
  /** List of ids due now, oldest first. State READY. */
  readonly ready: string;
  /** Sorted set: id -> lease expiry ms. State IN_FLIGHT. */
  readonly inFlight: string;
  /** Sorted set: id -> dead-lettered at ms. State DEAD. */
  readonly dead: string;
  /** Hash: id -> last error, for events that failed at least once. */
  readonly errors: string;
  /** Names the type in wake-up messages. */
  readonly tag: string;
}

export class RedisLayout {
  constructor(readonly prefix: string) {
    if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(prefix)) {
      throw new TypeError(`prefix must be 1-64 characters of letters, digits, '_', '.', ':' or '-'; got ${JSON.stringify(prefix)}`);
    }
  }

  /** Pub/sub channel on which enqueues announce a due time earlier than any the dispatchers know. */
  get wakeChannel(): string {
    return `${this.prefix}:wake`;
  }

  forType(type: string): TypeKeys {
    // Room for fan-out: a subscriber group will get its own ready/in-flight/dead
    // keys under `${base}:g:<group>:`, sharing meta and schedule, in the same slot.
    const base = `${this.prefix}:{${type}}`;
    return {
      meta: `${base}:m`,
      schedule: `${base}:s`,
      ready: `${base}:r`,
      inFlight: `${base}:f`,
      dead: `${base}:d`,
      errors: `${base}:e`,
      tag: type,
    };
  }
}
