import { Observable } from 'rxjs';
import { checkGroupArgument } from '../core/arguments';
import { type DelayedEventInstance, eventRouteOf } from '../core/delayed-event.decorator';
import { InvalidArgumentError, ServiceClosedError, WaitTimeoutError } from '../core/errors';
import { parseStoredBody } from '../core/stored-body';
import { type AllowedKeys, checkArgumentKeys } from '../core/option-keys';
import { FINAL_OUTCOMES, type OutcomeEvent, type StreamEntry, decodePosition, encodePosition, entriesAfter, entriesBefore, lastEntryId, outcomeOf, redisNow } from '../redis/outcome-streams';
import { OutageBackoff, sleep } from '../runtime/outage-backoff';
import { BulkCalls } from './bulk-calls';
import { checkEvent, checkTarget } from './inspection-checks';
import type { EventTarget } from './inspection-types';
import { DEFAULT_GROUP } from '../redis/redis-layout';
import { MAX_TIMER_MS } from './service-options';

/** outcomes$()'s options. */
export interface OutcomesOptions {
  /** Only this group's outcomes (and cancels, which end the event in every group); default: every group's. */
  readonly group?: string;
  /** Go on after this item's `position` (from an earlier subscription); default: from now. */
  readonly from?: string;
}

/** waitFor()'s options. */
export interface WaitForOptions {
  /** How long to wait; then it rejects with WaitTimeoutError. Required. */
  readonly timeoutMs: number;
  /** The final outcome of this group's delivery; default: the first of any group. */
  readonly group?: string;
}

const OUTCOMES_OPTION_KEYS = { group: true, from: true } as const satisfies AllowedKeys<OutcomesOptions>;
const WAIT_FOR_OPTION_KEYS = { timeoutMs: true, group: true } as const satisfies AllowedKeys<WaitForOptions>;

/** How long a reader of outcome streams waits after a look that found nothing. */
const POLL_MS = 100;
/** Entries read per stream per look. */
const STEP = 500;
/** How often outcomes$() without a type looks for types that started writing outcomes. */
const DISCOVER_MS = 5_000;

interface Stream {
  readonly type: string;
  readonly key: string;
}

/**
 * Outcome events across processes (since 0.6): outcomes$() and waitFor(),
 * over the capped stream per type and partition that settling scripts append
 * to when the outcomes option is on (lua/includes/outcome-add.lua). Read by
 * polling on the caller's connection: every stream is looked at every
 * POLL_MS while nothing new comes.
 */
export abstract class OutcomeCalls extends BulkCalls {
  /**
   * Each outcome written from now (or after `from`): handled, retried,
   * dead-lettered, snoozed, rate-limited or cancelled, of one type (an event
   * class or a type name) or, without one, of every type. In order within each
   * partition; across partitions, as they are read. A subscriber that comes
   * back with the last `position` it saw loses and repeats nothing, as long as
   * the streams still hold it (each keeps its last `maxLen`).
   */
  outcomes$<T extends DelayedEventInstance>(target?: EventTarget<T>, options: OutcomesOptions = {}): Observable<OutcomeEvent> {
    return new Observable<OutcomeEvent>((subscriber) => {
      let from: Map<string, string> | undefined;
      let group: string | undefined;
      try {
        if (target !== undefined) checkTarget(target);
        checkArgumentKeys(options, OUTCOMES_OPTION_KEYS, 'outcomes$');
        if (options.group !== undefined) group = checkGroupArgument(options.group);
        if (options.from !== undefined) {
          from = typeof options.from === 'string' ? decodePosition(options.from) : undefined;
          if (!from) throw new InvalidArgumentError('from', 'must be the position of an item outcomes$() gave');
        }
      } catch (error) {
        subscriber.error(error);
        return undefined;
      }
      // "From now": where each stream it can name now ends, asked at once on the connection this service's own
      // calls use, and so on the node that holds it, before any call made after subscribing reaches that node.
      // Redis's clock (TIME) is for the streams it cannot name yet; on a Cluster TIME goes to any node, whose
      // clock and queue say nothing of another node's stream.
      const ends = from ? undefined : this.endsNow(target);
      const now = from ? undefined : redisNow(this.parts.client);
      now?.catch(() => undefined);
      const stop = new AbortController();
      const emit = (stream: Stream, entry: StreamEntry, positions: Map<string, string>) => {
        positions.set(stream.key, entry[0]);
        const outcome = outcomeOf(stream.type, entry);
        if (outcome && (group === undefined || outcome.group === group || outcome.group === '*')) subscriber.next({ ...outcome, position: encodePosition(positions) });
      };
      this.follow(target, from, now, ends, emit, stop.signal).catch((error: unknown) => subscriber.error(error));
      return () => stop.abort();
    });
  }

  /**
   * The final outcome (handled, dead-lettered or cancelled) of one event,
   * from any process: at once if the stream still holds it, else when it
   * comes. Rejects with WaitTimeoutError after `timeoutMs`. Needs the outcomes
   * option on in the instances that handle the type (and in this service).
   */
  waitFor<T extends DelayedEventInstance>(target: EventTarget<T>, id: string, options: WaitForOptions): Promise<OutcomeEvent> {
    const check = () => {
      const type = checkEvent(target, id);
      if (options === null || typeof options !== 'object') throw new InvalidArgumentError('options', 'waitFor needs { timeoutMs }');
      checkArgumentKeys(options, WAIT_FOR_OPTION_KEYS, 'waitFor');
      const { timeoutMs } = options;
      if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_TIMER_MS) {
        throw new InvalidArgumentError('timeoutMs', `must be a number of ms above 0, at most ${MAX_TIMER_MS}; got ${String(timeoutMs)}`);
      }
      const group = options.group === undefined ? undefined : checkGroupArgument(options.group);
      if (this.parts.outcomesOff) {
        throw new InvalidArgumentError(
          'outcomes',
          'waitFor reads the outcome streams, which are written only with the outcomes option: set outcomes: {} on this service and on the instances that handle the type',
        );
      }
      return { type, timeoutMs, group };
    };
    return this.whenReady(check, async ({ type, timeoutMs, group }) => {
      const deadline = Date.now() + timeoutMs;
      const resolved = await this.resolve(target);
      const keys = (resolved && (await this.queueOf(resolved, id))) ?? this.parts.layout.forEvent(resolved?.route ?? { type, partitions: 1 }, id);
      const client = this.parts.client;
      const key = keys.outcomes;
      const matches = (entry: StreamEntry) => {
        const outcome = outcomeOf(type, entry);
        return outcome && outcome.id === id && FINAL_OUTCOMES.has(outcome.outcome) && (group === undefined || outcome.group === group || outcome.group === '*') ? outcome : undefined;
      };
      // Where the stream ends now, before anything is looked at: what lands after it is read below, so nothing falls between.
      let after = await this.read(() => lastEntryId(client, key));
      // Looking back. An event still waiting or running where it is waited for has no final outcome yet: one in the
      // stream is an earlier event's of the same id. One stored elsewhere ended no earlier than it was enqueued
      // (a minute of margin for the enqueuer's clock).
      const stored = await this.read(() => this.stored.read(keys, id));
      const state = stored && (group === undefined ? (stored.groups ? undefined : stored.state) : group === DEFAULT_GROUP ? stored.state : stored.groups?.[group]);
      const open = state === 'scheduled' || state === 'ready' || state === 'in-flight';
      const enqueuedAt = stored ? parseStoredBody(id, stored.body).enqueuedAt : undefined;
      const since = typeof enqueuedAt === 'number' ? `${Math.max(0, enqueuedAt - 60_000)}-0` : '-';
      // The first page whatever the timeout: an outcome the stream holds is answered at once.
      for (let before = '+', first = true; !open && (first || Date.now() < deadline); first = false) {
        const page = await this.read(() => entriesBefore(client, key, before, 1_000, since));
        for (const entry of page) {
          const found = matches(entry);
          if (found) return { ...found, position: encodePosition(new Map([[key, entry[0]]])) };
        }
        if (page.length < 1_000) break;
        before = page[page.length - 1]![0];
      }
      while (Date.now() < deadline) {
        if (this.isClosed()) throw new ServiceClosedError();
        const entries = await this.read(() => entriesAfter(client, key, after, STEP));
        for (const entry of entries) {
          after = entry[0];
          const found = matches(entry);
          if (found) return { ...found, position: encodePosition(new Map([[key, entry[0]]])) };
        }
        if (entries.length === 0) await sleep(Math.min(POLL_MS, Math.max(0, deadline - Date.now())));
      }
      throw new WaitTimeoutError(type, id, timeoutMs);
    });
  }

  /** A read bounded by commandTimeoutMs: one sent on a connection that dropped fails, and is made again, rather than hang. */
  private read<R>(work: () => Promise<R>): Promise<R> {
    return this.parts.scripts.bounded('outcomes', work);
  }

  /** Reads every stream of `target` (or of every type) from `from` (or from now), handing each entry to `emit`, until `stop`. */
  private async follow(
    target: EventTarget | undefined,
    from: Map<string, string> | undefined,
    startedAt: Promise<number> | undefined,
    ends: Map<string, Promise<string>> | undefined,
    emit: (stream: Stream, entry: StreamEntry, positions: Map<string, string>) => void,
    stop: AbortSignal,
  ): Promise<void> {
    const client = this.parts.client;
    const positions = new Map<string, string>(from ?? []);
    const streams = new Map<string, Stream>();
    const backoff = new OutageBackoff();
    let lookedAt = 0;
    // Where streams found at the start begin: where they ended when subscribed (startOf), else the subscription's
    // first millisecond (asked again if that failed), or, going on from `from`, its newest entry's for streams it
    // does not name. Those found later begin at their start.
    let start: number | undefined;
    let initial = true;
    while (!stop.aborted && !this.isClosed()) {
      try {
        start ??= from ? Math.max(0, ...[...from.values()].map((id) => Number(id.split('-')[0]))) : await this.read(() => (startedAt ? startedAt.catch(() => redisNow(client)) : redisNow(client)));
        if (initial || (target === undefined && Date.now() - lookedAt > DISCOVER_MS)) {
          lookedAt = Date.now();
          for (const stream of await this.read(() => this.streamsOf(target))) {
            if (streams.has(stream.key)) continue;
            // Known before the stream is followed: a read that fails here leaves it for the next try.
            const position = positions.get(stream.key) ?? (initial ? await this.startOf(stream.key, ends, start) : '0-0');
            positions.set(stream.key, position);
            streams.set(stream.key, stream);
          }
          initial = false;
        }
        let read = 0;
        for (const stream of streams.values()) {
          const entries = await this.read(() => entriesAfter(client, stream.key, positions.get(stream.key) ?? '0-0', STEP));
          for (const entry of entries) {
            if (stop.aborted) return;
            emit(stream, entry, positions);
          }
          read += entries.length;
        }
        backoff.reset();
        if (read === 0) await sleep(POLL_MS, stop);
      } catch {
        // Redis out of reach: the positions hold, so nothing is lost or repeated once it answers.
        await sleep(backoff.next(), stop);
      }
    }
  }

  /**
   * The end of each stream a subscription to `target` can name without a read: a class's partitions, a type
   * name's stream as an unpartitioned type has it; none for every type. Each asked at once (outcomes$()).
   */
  private endsNow(target: EventTarget | undefined): Map<string, Promise<string>> | undefined {
    if (target === undefined) return undefined;
    const route = typeof target === 'string' ? { type: target, partitions: 1 } : eventRouteOf(target);
    const ends = new Map<string, Promise<string>>();
    for (const keys of this.parts.layout.partitionsOf(route)) {
      // Through the ready gate, which sends calls in the order they are made: first in line once the
      // connection is ready, ahead of the calls made after subscribing.
      const end = this.read(() => lastEntryId(this.parts.client, keys.outcomes));
      end.catch(() => undefined);
      ends.set(keys.outcomes, end);
    }
    return ends;
  }

  /** Where a stream found at the start is followed from: its end when subscribed, asked again if that failed; else the subscription's first millisecond. */
  private startOf(key: string, ends: Map<string, Promise<string>> | undefined, start: number): Promise<string> {
    const end = ends?.get(key);
    if (!ends || !end) return Promise.resolve(`${Math.max(0, start - 1)}-18446744073709551615`);
    // Bounded as every read here; not answered (an outage, a stuck call), it is asked again, and anew on the next try.
    return this.read(() => end).catch(() => {
      const again = lastEntryId(this.parts.client, key);
      again.catch(() => undefined);
      ends.set(key, again);
      return this.read(() => again);
    });
  }

  /** The outcome streams of a type (every partition), or of every type stored under the prefix. */
  private async streamsOf(target: EventTarget | undefined): Promise<Stream[]> {
    const routes =
      target === undefined
        ? (await this.stored.types()).map((t) => ({ type: t.type, partitions: t.partitions }))
        : typeof target === 'string'
          ? [(await this.stored.typeByName(target))?.route ?? { type: target, partitions: 1 }]
          : [eventRouteOf(target)];
    return routes.flatMap((route) => this.parts.layout.partitionsOf(route).map((keys) => ({ type: route.type, key: keys.outcomes })));
  }
}
