import type { RedisClient } from './redis-client';

/** What became of a call, as the outcome stream records it (since 0.6; lua/includes/outcome-add.lua). */
export type OutcomeKind = 'handled' | 'retried' | 'dead-lettered' | 'snoozed' | 'rate-limited' | 'cancelled';

/** The outcomes that end an event: waitFor() resolves with one. */
export const FINAL_OUTCOMES: ReadonlySet<OutcomeKind> = new Set(['handled', 'dead-lettered', 'cancelled']);

/** One outcome from a type's streams (since 0.6): outcomes$() and waitFor(). */
export interface OutcomeEvent {
  readonly type: string;
  readonly id: string;
  /** The group whose call it was; '*' for a cancel, which ends the event in every group. */
  readonly group: string;
  readonly outcome: OutcomeKind;
  /** The attempt that ran (for a cancel: the last one spent, 0 when none ran). */
  readonly attempt: number;
  /** When it was written (Redis's clock). */
  readonly at: Date;
  /** Opaque: give it as `from` to outcomes$() to go on after this item. */
  readonly position: string;
  /** handled: what the call recorded with delivery.result, JSON parsed. */
  readonly result?: unknown;
  /** retried, dead-lettered: the error or reason. */
  readonly error?: string;
}

/** A stream entry as XREAD and XRANGE give it. */
export type StreamEntry = [id: string, fields: string[]];

/** An entry as an outcome, without its position (the caller's, which knows every stream it reads). */
export function outcomeOf(type: string, [entryId, fields]: StreamEntry): Omit<OutcomeEvent, 'position'> | undefined {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
  if (f.id === undefined || f.o === undefined) return undefined;
  let result: unknown;
  if (f.r !== undefined) {
    try {
      result = JSON.parse(f.r);
    } catch {
      result = undefined;
    }
  }
  return {
    type,
    id: f.id,
    group: f.g ?? 'default',
    outcome: f.o as OutcomeKind,
    attempt: Number(f.a ?? 0),
    at: new Date(Number(entryId.split('-')[0])),
    ...(f.r !== undefined ? { result } : {}),
    ...(f.e !== undefined ? { error: f.e } : {}),
  };
}

/** The newest entry id of a stream, '0-0' when it holds none: reading after it sees only what comes next. */
export async function lastEntryId(client: RedisClient, key: string): Promise<string> {
  const newest = (await client.xrevrange(key, '+', '-', 'COUNT', 1)) as StreamEntry[];
  return newest[0]?.[0] ?? '0-0';
}

/** The entries after `after`, at most `count`, oldest first. */
export async function entriesAfter(client: RedisClient, key: string, after: string, count: number): Promise<StreamEntry[]> {
  return (await client.xrange(key, `(${after}`, '+', 'COUNT', count)) as StreamEntry[];
}

/** Pages backwards through a stream from `before` (exclusive; '+' for the newest) down to `since` ('-': its start), `count` at a time. */
export async function entriesBefore(client: RedisClient, key: string, before: string, count: number, since = '-'): Promise<StreamEntry[]> {
  return (await client.xrevrange(key, before === '+' ? '+' : `(${before}`, since, 'COUNT', count)) as StreamEntry[];
}

/** A position: every stream's last entry id read, opaque to callers. */
export function encodePosition(positions: ReadonlyMap<string, string>): string {
  return Buffer.from(JSON.stringify(Object.fromEntries(positions))).toString('base64url');
}

/** A position given as `from`; undefined when it is not one this library wrote. */
export function decodePosition(position: string): Map<string, string> | undefined {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(position, 'base64url').toString());
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
    const positions = new Map<string, string>();
    for (const [key, id] of Object.entries(parsed)) {
      if (typeof id !== 'string' || !/^\d+-\d+$/.test(id)) return undefined;
      positions.set(key, id);
    }
    return positions;
  } catch {
    return undefined;
  }
}

/** Redis's clock, ms. */
export async function redisNow(client: RedisClient): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}
