import type { EventError, EventState, StoredEvent } from './stored-types';

// The records src/redis/stored-events.ts reads besides envelopes: an event's
// error log, a history record, and what a named group holds of an event.

/** An event as a named group holds it. */
export interface GroupRead {
  readonly state: EventState;
  readonly attempt?: number;
  readonly lastError?: string | null;
  readonly errorLog?: string | null;
  readonly leaseExpiresAt?: number;
  readonly deadLetteredAt?: number;
}

/** An error log as lua/includes/error-log-append.lua writes it; undefined when there is none (or it cannot be read). */
export function parseErrorLog(stored: string | null | undefined): EventError[] | undefined {
  if (!stored) return undefined;
  try {
    const log = JSON.parse(stored) as unknown;
    if (!Array.isArray(log)) return undefined;
    const errors = log.flatMap((entry): EventError[] =>
      Array.isArray(entry) && typeof entry[0] === 'number' && typeof entry[1] === 'number' && typeof entry[2] === 'string' ? [{ attempt: entry[0], at: new Date(entry[1]), message: entry[2] }] : [],
    );
    return errors.length > 0 ? errors : undefined;
  } catch {
    return undefined;
  }
}

/** A history record, 'attempt|handled at|due|body' (lua/includes/handled-keep.lua). */
export function parseHandled(id: string, record: string): StoredEvent | undefined {
  const match = /^(\d+)\|(\d+)\|(\d+)\|/.exec(record);
  if (!match) return undefined;
  return {
    id,
    state: 'handled',
    attempt: Number(match[1]),
    handledAt: Number(match[2]),
    dueAt: Number(match[3]),
    body: record.slice(match[0].length),
    lastError: undefined,
  };
}
