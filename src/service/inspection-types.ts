import type { BodyExtras } from '../core/body-extras';
import type { Cluster, Redis } from 'ioredis';
import type { DelayedEventInstance, EventClass } from '../core/delayed-event.decorator';
import { boundErrorText, describe } from '../core/errors';
import type { AllowedKeys } from '../core/option-keys';
import type { EventCodec } from '../core/event-codec';
import type { EventContext } from '../core/event-context';
import { type JsonEvent, parseStoredBody } from '../core/stored-body';
import type { EventError, EventState, StoredDeadLetter, StoredEvent } from '../redis/stored-events';
import type { CallRecords, EventLogLine } from '../redis/call-records';
import type { IORedisClient } from './service-options';

// What the Inspector (src/service/inspector.ts) takes and answers, and how a
// stored event becomes an InspectedEvent: decoded with the caller's class, or
// by type name as parsed JSON.

/** One stored event as find() and list() see it. */
export interface InspectedEvent<T = JsonEvent> {
  readonly id: string;
  readonly state: EventState;
  readonly dueAt: Date;
  /** Attempts started: 0 while never handled; in flight, the one running. */
  readonly attempt: number;
  /** Its priority among READY events: 0 (the best, and the default) to 1,000,000 (since 0.6). */
  readonly priority: number;
  /** Its own attempts, when it was enqueued with `maxAttempts` (since 0.6); else its handler's apply. */
  readonly maxAttempts?: number;
  /** How many times a handler snoozed it, when it did (since 0.6). */
  readonly snoozes?: number;
  /** When it was first enqueued; undefined when its stored body does not say. */
  readonly enqueuedAt: Date | undefined;
  /** Stored by a debounce (since 0.6): when its burst began. */
  readonly burstStartedAt?: Date;
  /** Stored by a debounce with a maxWaitMs (since 0.6): the latest it is due, however many enqueues follow. */
  readonly dueBy?: Date;
  /** find() only (since 0.6): a leading debounce holds a trailing payload until this event settles; when that call is due. */
  readonly trailingDueAt?: Date;
  /** find() only (since 0.6): until when enqueues of this id answer 'throttled'. */
  readonly throttledUntil?: Date;
  /** find() only (since 0.6): a flow's parent (docs/flows.md): the children it still waits for, by type and id. */
  readonly waitingFor?: ReadonlyArray<{ readonly type: string; readonly id: string }>;
  readonly context: EventContext;
  /** The last error recorded (a failed attempt, or why it is dead), if any. */
  readonly lastError: string | undefined;
  /** The event (a class instance, or for a type name the payload as parsed JSON); undefined when it cannot be decoded. */
  readonly event: T | undefined;
  /** Why `event` is undefined. */
  readonly decodeError?: string;
  /** In flight: when its lease runs out and another instance may take it. */
  readonly leaseExpiresAt?: Date;
  /** Dead: when it was dead-lettered. */
  readonly deadLetteredAt?: Date;
  /** Handled (kept by keepHandled): when; `attempt` is the attempt that succeeded. */
  readonly handledAt?: Date;
  /** Its last failures, oldest first (up to 10), each with its attempt, time and message; absent when it never failed. */
  readonly errors?: readonly EventError[];
  /** find() only, for a type with registered groups: the event's state in each group that still holds it. */
  readonly groups?: Readonly<Record<string, EventState>>;
  /** find() only (since 0.6): the last progress its current attempt reported (delivery.progress), as JSON parsed. */
  readonly progress?: unknown;
  /** find() only (since 0.6): the lines its calls logged (delivery.log), oldest first, the last 100. */
  readonly logs?: readonly EventLogLine[];
  /** find() only (since 0.6), handled events kept by keepHandled: what the call recorded (delivery.result), as JSON parsed. */
  readonly result?: unknown;
  /** find() only (since 0.6): per named group holding the event, the progress and log lines of its calls there. */
  readonly groupReports?: Readonly<Record<string, CallRecords>>;
}

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

export interface ListOptions {
  /** Events to skip (default 0). */
  readonly offset?: number;
  /** Page size, 1 to 1,000 (default 100). */
  readonly limit?: number;
  /** Subscriber group (default: the default group, the type's own keys). */
  readonly group?: string;
}

export interface DeadLetterPage {
  /** Subscriber group (default: the default group). */
  readonly group?: string;
  /** Dead letters to skip (default 0). */
  readonly offset?: number;
  /** Page size, 1 to 10,000 (default 100). */
  readonly limit?: number;
}

export interface DueTimelineOptions {
  /** How far ahead, ms: 1 s to 30 days (default 1 hour). */
  readonly horizonMs?: number;
  /** Equal slots the horizon is cut into, 1 to 500 (default 60). */
  readonly slots?: number;
  /** Subscriber group whose retry schedule to read (default: the type's own schedule). */
  readonly group?: string;
}

/** The options of the inspection calls, each once (src/core/option-keys.ts). */
export const LIST_OPTION_KEYS = { offset: true, limit: true, group: true } as const satisfies AllowedKeys<ListOptions>;
export const DEAD_LETTER_PAGE_KEYS = { offset: true, limit: true, group: true } as const satisfies AllowedKeys<DeadLetterPage>;
export const DUE_TIMELINE_OPTION_KEYS = { horizonMs: true, slots: true, group: true } as const satisfies AllowedKeys<DueTimelineOptions>;
export const GROUP_OPTION_KEYS = { group: true } as const satisfies AllowedKeys<{ readonly group?: string }>;
export const TIMEOUT_OPTION_KEYS = { timeoutMs: true } as const satisfies AllowedKeys<{ readonly timeoutMs?: number }>;
export const INSPECTOR_OPTION_KEYS = { redis: true, prefix: true, commandTimeoutMs: true, idempotencyWindowMs: true } as const satisfies AllowedKeys<InspectorOptions>;

/** An event class, or its type name (payloads then come back as parsed JSON). */
export type EventTarget<T extends DelayedEventInstance = DelayedEventInstance> = EventClass<T> | string;

export const MAX_PAGE = 1_000;
export const MAX_DEAD_LETTER_PAGE = 10_000;
/** Dead letters per script call when replaying or purging: a huge set never holds Redis in one script. */
export const DEAD_LETTER_CHUNK = 1_000;

export interface InspectorOptions {
  /**
   * A connection URL (`redis://`, `rediss://`), or an ioredis Redis or Cluster
   * (ioredis 5 or 6). A client you pass stays yours: close() does not quit it.
   */
  readonly redis: string | Redis | Cluster | IORedisClient;
  /** The services' `prefix` (default `delayed-events`). */
  readonly prefix?: string;
  /** Each call fails with RedisCallTimeoutError after this long (default 10 s); types() is unbounded. */
  readonly commandTimeoutMs?: number;
  /**
   * How long cancel() marks the id it removed, so that a late re-send of its
   * enqueue is a duplicate: the services' idempotencyWindowMs (default 300,000, 5 minutes; 0: no mark).
   */
  readonly idempotencyWindowMs?: number;
}

export function inspectedEvent(codec: EventCodec, eventClass: EventClass | undefined, stored: StoredEvent): InspectedEvent<unknown> {
  const decoded = decodeStored(codec, eventClass, stored.id, stored.body);
  return {
    id: stored.id,
    state: stored.state,
    dueAt: new Date(stored.dueAt),
    attempt: stored.attempt,
    priority: decoded.extras.priority ?? 0,
    ...(decoded.extras.maxAttempts !== undefined ? { maxAttempts: decoded.extras.maxAttempts } : {}),
    ...(decoded.extras.snoozes ? { snoozes: decoded.extras.snoozes } : {}),
    enqueuedAt: decoded.enqueuedAt === undefined ? undefined : new Date(decoded.enqueuedAt),
    ...burstOf(decoded.enqueuedAt, decoded.extras.maxWaitMs),
    context: decoded.context,
    // Bounded on read too: an error stored before text was bounded at the write may be megabytes.
    lastError: stored.lastError === undefined ? undefined : boundErrorText(stored.lastError),
    event: decoded.event,
    ...(decoded.decodeError ? { decodeError: decoded.decodeError } : {}),
    ...(stored.leaseExpiresAt !== undefined ? { leaseExpiresAt: new Date(stored.leaseExpiresAt) } : {}),
    ...(stored.deadLetteredAt !== undefined ? { deadLetteredAt: new Date(stored.deadLetteredAt) } : {}),
    ...(stored.handledAt !== undefined ? { handledAt: new Date(stored.handledAt) } : {}),
    ...(stored.errors ? { errors: stored.errors.map((e) => ({ ...e, message: boundErrorText(e.message) })) } : {}),
    ...(stored.groups ? { groups: stored.groups } : {}),
  };
}

/** A debounced event's burst: its body's enqueued-at is when the burst began (lua/includes/enqueue-policy.lua). */
function burstOf(startedAt: number | undefined, maxWaitMs: number | undefined): Pick<InspectedEvent, 'burstStartedAt' | 'dueBy'> {
  if (startedAt === undefined || maxWaitMs === undefined) return {};
  return { burstStartedAt: new Date(startedAt), ...(maxWaitMs > 0 ? { dueBy: new Date(startedAt + maxWaitMs) } : {}) };
}

/** A stored body as the caller's class (or, by type name, as parsed JSON), and why it could not be decoded. */
export function decodeStored(
  codec: EventCodec,
  eventClass: EventClass | undefined,
  id: string,
  body: string,
): { event: unknown; context: EventContext; enqueuedAt: number | undefined; extras: BodyExtras; decodeError?: string; decodeMessage?: string } {
  if (eventClass) {
    try {
      const decoded = codec.decode(eventClass, id, body);
      return { event: decoded.event, context: decoded.context, enqueuedAt: decoded.enqueuedAt || undefined, extras: decoded.extras };
    } catch (error) {
      const parsed = parseStoredBody(id, body);
      return {
        event: undefined,
        context: {},
        enqueuedAt: parsed.enqueuedAt,
        extras: parsed.extras,
        decodeError: describe(error),
        decodeMessage: error instanceof Error ? error.message : describe(error),
      };
    }
  }
  const parsed = parseStoredBody(id, body);
  return { event: parsed.event, context: parsed.context, enqueuedAt: parsed.enqueuedAt, extras: parsed.extras, ...(parsed.error ? { decodeError: parsed.error, decodeMessage: parsed.error } : {}) };
}

/** A dead letter as read, decoded with the caller's class (or, by type name, as parsed JSON). */
export function deadLetterOf(codec: EventCodec, eventClass: EventClass | undefined, letter: StoredDeadLetter): DeadLetter<unknown> {
  const decoded = decodeStored(codec, eventClass, letter.id, letter.body);
  return {
    id: letter.id,
    event: decoded.event,
    context: decoded.context,
    error: boundErrorText(letter.error || (decoded.decodeMessage ? `undecodable: ${decoded.decodeMessage}` : '')),
    attempts: letter.attempts,
    deadLetteredAt: new Date(letter.deadLetteredAt),
    body: letter.body,
  };
}
