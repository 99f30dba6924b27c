// What src/redis/stored-events.ts reads, as the Inspector and the gauges are given it.

/**
 * Where an event is, in its type's (or group's) keys: stored and waiting or
 * running, dead, or handled and kept in the history (keepHandled); since 0.6
 * `waiting`: a parent waiting for its children (docs/flows.md).
 */
export type EventState = 'scheduled' | 'ready' | 'in-flight' | 'dead' | 'handled' | 'waiting';
export const EVENT_STATES: readonly EventState[] = ['scheduled', 'ready', 'in-flight', 'dead', 'handled', 'waiting'];

/** One failure of an event, as its error log keeps it (the last 10). */
export interface EventError {
  /** The attempt that failed (or, for a lease that ran out, the one in flight). */
  readonly attempt: number;
  readonly at: Date;
  readonly message: string;
}

/** How many events are in each state. */
export interface StateCounts {
  readonly scheduled: number;
  readonly ready: number;
  readonly inFlight: number;
  readonly dead: number;
  /** Since 0.6: parents waiting for their children (docs/flows.md); counted in no other state. */
  readonly waiting: number;
  /**
   * How long the oldest READY event has waited since it fell due, in ms;
   * absent when none is ready. Stuck work shows here first: events due with
   * no handler free, or no instance consuming their group.
   */
  readonly oldestReadyMs?: number;
  /**
   * READY events that instances left for one with a newer event class version
   * (they cannot read them; no attempt was spent): not in `ready`. Absent when none.
   */
  readonly awaitingNewerVersion?: number;
}

/** counts(): the type's own keys (its default group), and each registered group's, when it has any. */
export interface EventCounts extends StateCounts {
  readonly groups?: Readonly<Record<string, StateCounts>>;
}

/** A type found under the prefix. */
export interface EventTypeInfo {
  readonly type: string;
  /** 1 for a type without partitions; else one more than the highest partition that holds a key. */
  readonly partitions: number;
  /** Registered subscriber groups (`default` among them once registered), sorted; empty when none are. */
  readonly groups: readonly string[];
  /** Paused (in every partition found). */
  readonly paused: boolean;
  /** How many recurring schedules the type has; absent when none. A type with schedules is listed even with nothing stored. */
  readonly schedules?: number;
}

/** One stored event as read, before its body is decoded. */
export interface StoredEvent {
  readonly id: string;
  readonly state: EventState;
  readonly dueAt: number;
  /** Attempts started: 0 while never handled; in flight, the one running. */
  readonly attempt: number;
  /** The stored body (JSON, as the codec wrote it). */
  readonly body: string;
  readonly lastError: string | undefined;
  readonly leaseExpiresAt?: number;
  readonly deadLetteredAt?: number;
  /** Handled: when (keepHandled). */
  readonly handledAt?: number;
  /** Its last failures, oldest first (up to 10); absent when it never failed. */
  readonly errors?: readonly EventError[];
  /** For a type with registered groups: the event's state in each group that still holds it. */
  readonly groups?: Readonly<Record<string, EventState>>;
}

/** A dead letter as read, before its body is decoded. */
export interface StoredDeadLetter {
  readonly id: string;
  readonly attempts: number;
  readonly body: string;
  readonly error: string;
  readonly deadLetteredAt: number;
}

/** Partitions a type may have (@DelayedEvent allows up to 1,024): a type name is resolved by probing them all. */
export const MAX_PARTITIONS = 1_024;

/** Events of one class version waiting in a queue for an instance that reads it. */
export interface NewerVersionWait {
  readonly version: number;
  readonly events: number;
  /** When an instance of that version last took from them, or they were first left (Redis clock, ms). */
  readonly since: number;
}
