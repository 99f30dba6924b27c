import type { DelayedEventInstance, EventClass } from '../core/delayed-event.decorator';
import { parseEnvelope } from '../core/envelope';
import type { EventCodec } from '../core/event-codec';
import type { EventContext } from '../core/event-context';
import { parseStoredBody } from '../core/stored-body';
import type { DeadLetterStep, LuaScripts, RedisClient } from '../redis/lua-scripts';
import type { TypeKeys } from '../redis/redis-layout';

export interface DeadLetter<T> {
  readonly id: string;
  /** The event, or undefined when its stored form cannot be decoded (see `error`). */
  readonly event: T | undefined;
  readonly context: EventContext;
  /** The last error, or why it could not be decoded. */
  readonly error: string;
  /** Attempts made before it was parked. */
  readonly attempts: number;
  readonly deadLetteredAt: Date;
  /** The stored JSON, for events that cannot be decoded. */
  readonly body: string;
}

/** Dead letters per script call when replaying or purging. */
export const DEAD_LETTER_CHUNK = 1_000;

/** Reads and manages one type's dead-letter set. */
export class DeadLetters {
  constructor(
    private readonly client: RedisClient,
    private readonly scripts: LuaScripts,
    private readonly codec: EventCodec,
  ) {}

  /** Oldest first, across all the type's partitions. */
  /** `eventClass` may be a type name: events are then the payloads as parsed JSON. */
  async list<T extends DelayedEventInstance>(queues: readonly TypeKeys[], eventClass: EventClass<T> | string, offset: number, limit: number): Promise<Array<DeadLetter<T>>> {
    if (queues.length === 1) return this.listQueue(queues[0]!, eventClass, offset, limit);
    // Each partition's oldest offset+limit, merged by time: enough to cut the page from.
    const perQueue = await Promise.all(queues.map((keys) => this.listQueue(keys, eventClass, 0, offset + limit)));
    return perQueue
      .flat()
      .sort((a, b) => a.deadLetteredAt.getTime() - b.deadLetteredAt.getTime())
      .slice(offset, offset + limit);
  }

  private async listQueue<T extends DelayedEventInstance>(keys: TypeKeys, eventClass: EventClass<T> | string, offset: number, limit: number): Promise<Array<DeadLetter<T>>> {
    const flat: string[] = await this.client.zrange(keys.dead, String(offset), String(offset + limit - 1), 'WITHSCORES');
    if (flat.length === 0) return [];
    const ids: string[] = [];
    const deadAt: number[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      ids.push(flat[i]!);
      deadAt.push(Number(flat[i + 1]));
    }
    // The hashes share the type's hash slot, so one pipeline serves on a Cluster too.
    // A named group keeps only headers (attempt, due); the body is the type's.
    const ownBodies = keys.sharedMeta === keys.meta;
    const pipeline = this.client.pipeline().hmget(keys.meta, ...ids).hmget(keys.errors, ...ids);
    if (!ownBodies) pipeline.hmget(keys.sharedMeta, ...ids);
    const replies = await pipeline.exec();
    const envelopes = (replies?.[0]?.[1] ?? []) as Array<string | null>;
    const errors = (replies?.[1]?.[1] ?? []) as Array<string | null>;
    const bodies = ownBodies ? envelopes : ((replies?.[2]?.[1] ?? []) as Array<string | null>);
    return ids.flatMap((id, i) => {
      const envelope = envelopes[i];
      const bodyEnvelope = bodies[i];
      if (!envelope || !bodyEnvelope) return [];
      const { attempt } = parseEnvelope(envelope);
      const { body } = parseEnvelope(bodyEnvelope);
      let event: T | undefined;
      let context: EventContext = {};
      let error = errors[i] ?? '';
      try {
        const decoded = typeof eventClass === 'string' ? parsedByName(id, body) : this.codec.decode(eventClass, id, body);
        event = decoded.event as T;
        context = decoded.context;
      } catch (decodeError) {
        if (!error) error = `undecodable: ${(decodeError as Error).message}`;
      }
      return [{ id, event, context, error, attempts: attempt, deadLetteredAt: new Date(deadAt[i]!), body }];
    });
  }

  /** Back to scheduled, due now, attempts reset. No ids: every dead letter of the queue. */
  async replay(keys: TypeKeys, ids?: readonly string[]): Promise<number> {
    return this.apply(ids, (someIds, limit) => this.scripts.replayDead(keys, someIds, limit));
  }

  /** Removes dead letters for good. No ids: every dead letter of the queue. */
  async purge(keys: TypeKeys, ids?: readonly string[]): Promise<number> {
    return this.apply(ids, (someIds, limit) => this.scripts.purgeDead(keys, someIds, limit));
  }

  /** On the given ids, or on all (oldest first), in chunks: a long list or a huge dead-letter set never holds Redis in one script. */
  private async apply(ids: readonly string[] | undefined, step: (ids: readonly string[], limit: number) => Promise<DeadLetterStep>): Promise<number> {
    let total = 0;
    if (ids) {
      for (let from = 0; from < ids.length; from += DEAD_LETTER_CHUNK) {
        const chunk = ids.slice(from, from + DEAD_LETTER_CHUNK);
        total += (await step(chunk, chunk.length)).done;
      }
      return total;
    }
    for (;;) {
      const { done, taken } = await step([], DEAD_LETTER_CHUNK);
      total += done;
      if (taken < DEAD_LETTER_CHUNK) return total;
    }
  }
}

/** A body read by type name (no class): the payload as parsed JSON; throws as decode would when it is none. */
function parsedByName(id: string, body: string): { event: unknown; context: EventContext } {
  const parsed = parseStoredBody(id, body);
  if (!parsed.event) throw new Error(parsed.error);
  return parsed;
}
