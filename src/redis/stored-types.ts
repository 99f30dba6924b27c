// What src/redis/stored-events.ts reads, as the Inspector and the gauges are given it.

/** Where a stored event is, in its type's (or group's) keys. */
export type EventState = 'scheduled' | 'ready' | 'in-flight' | 'dead';
export const EVENT_STATES: readonly EventState[] = ['scheduled', 'ready', 'in-flight', 'dead'];

/** How many events are in each state. */
export interface StateCounts {
  readonly scheduled: number;
  readonly ready: number;
  readonly inFlight: number;
  readonly dead: number;
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
