import type { TypeActivity } from './activity-log';

/** What a ReadyReader (src/runtime/ready-reader.ts) is set with. */
export interface ReaderSettings {
  readonly leaseMs: number;
  readonly heartbeatLeaseMs: number; // each claim's heartbeat lease (lua/renew-leases.lua; 0: none)
  readonly maxAttempts: number;
  /** How long an idle reader waits for a nudge before it looks again by itself (readerBlockMs). */
  readonly blockMs: number;
  /**
   * How long an event claimed ahead of the handler slots may wait for one:
   * the part of its lease beyond the handler timeout (leaseGraceMs). A reader
   * claims ahead only what it expects to start within a quarter of it, and
   * gives back an event that waited half of it, so a handler started late
   * still ends within its lease.
   */
  readonly graceMs: number;
  readonly activity?: TypeActivity; // counts for the fleet's activity charts (option recordActivity), if kept
  /** The event class's version here: events a newer class wrote are left, unclaimed, for instances that read them. */
  readonly version: number;
  readonly priorityAgingMs: number; // events with a priority due longer ago are claimed first (0: never)
  /** Told when a claim left events for a newer version: instances that read it should look now. */
  readonly onLeftForNewerVersion?: () => void;
  /** Told when completions freed room under a concurrency limit that a claim had found full (`room`: instances should look now), or queued a flow notice (`noticed`, since 0.6). */
  readonly onFreed?: (room: boolean, noticed: boolean) => void;
  /**
   * For a handler that shares capacity per key (HandlerOptions.key): the key
   * of each event at the head of the ready list, which the reader sorts into
   * its key's list before each claim (lua/classify.lua).
   */
  readonly sortByKey?: (events: ReadonlyArray<{ readonly id: string; readonly body: string }>) => Array<{ id: string; key: string }>;
  /**
   * The consumer confirms each event itself, with confirm(), right before
   * the call that runs it (a batch handler, whose events gather first): the
   * reader claims none started and hands each on as soon as it has a slot.
   */
  readonly confirmedByConsumer?: boolean;
  /**
   * Lets its idle waits go quiet (since 0.6, src/runtime/quiet-looks.ts):
   * while wake-ups reach this instance and nothing was claimed here for
   * QUIET_AFTER_MS, an idle reader waits for a nudge alone, not readerBlockMs.
   */
  readonly listening?: () => boolean;
  /** Told when a claim took events: the queue's dispatchers here stop waiting quietly (their leases are to watch). */
  readonly onClaimed?: () => void;
  /** Told when events it held went back to READY (src/runtime/reader-give-backs.ts). */
  readonly onGivenBack?: () => void;
}
