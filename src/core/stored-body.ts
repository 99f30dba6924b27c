import { type BodyExtras, formatExtras, parseExtras } from './body-extras';
import { type EventContext, isEventContext } from './event-context';

/** An event read without its class (by type name): the stored payload as parsed JSON, with its id. */
export interface JsonEvent {
  readonly id: string;
  readonly [field: string]: unknown;
}

/**
 * A body of version 2 and up starts with `<version>|`; a body without (JSON
 * starts with `[` or `{`) is version 1, as every body written before versions
 * existed. Only the first digits are read: lua/includes/envelope-attempt-version.lua
 * reads them the same way when a claim decides whether the reader can read it.
 */
export function splitBodyVersion(body: string): { version: number; json: string } {
  let i = 0;
  for (; i < body.length && i < 8; i++) {
    const c = body.charCodeAt(i);
    if (c < 48 || c > 57) break;
  }
  if (i === 0 || body.charCodeAt(i) !== 124) return { version: 1, json: body };
  return { version: Number(body.slice(0, i)), json: body.slice(i + 1) };
}

/** The stored form of a body's JSON at `version`: version 1 costs no byte. */
export function versionedBody(json: string, version: number): string {
  return version === 1 ? json : `${version}|${json}`;
}

export interface ParsedBody {
  /** The payload as JSON, its id put back; undefined when the body is not a stored event (see `error`). */
  readonly event: JsonEvent | undefined;
  readonly context: EventContext;
  /** When it was enqueued (ms), or undefined when the body does not say. */
  readonly enqueuedAt: number | undefined;
  /** The version of the event's class that wrote it (1: written without one). */
  readonly version: number;
  /** Why the body could not be read, when it could not. */
  readonly error?: string;
  /** Its own attempts and snooze count (src/core/body-extras.ts). */
  readonly extras: BodyExtras;
}

/**
 * Reads a stored body as EventCodec writes it (`[enqueued at, payload, context?]`,
 * or 0.1's `{t, p, c}`) without the event's class: for tools that know only the
 * type's name. The payload stays plain JSON (Dates are strings); never throws.
 */
export function parseStoredBody(id: string, body: string): ParsedBody {
  const { version, json } = splitBodyVersion(body);
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (error) {
    return { event: undefined, context: {}, enqueuedAt: undefined, version, error: `stored body is not JSON (${(error as Error).message})`, extras: {} };
  }
  let enqueuedAt: unknown, payload: unknown, context: unknown;
  let extras: BodyExtras = {};
  if (Array.isArray(parsed)) {
    [enqueuedAt, payload, context] = parsed as unknown[];
    extras = parseExtras(parsed[3]);
  } else if (parsed !== null && typeof parsed === 'object') {
    ({ t: enqueuedAt, p: payload, c: context } = parsed as { t?: unknown; p?: unknown; c?: unknown });
  }
  const at = typeof enqueuedAt === 'number' && Number.isFinite(enqueuedAt) ? enqueuedAt : undefined;
  const ctx = isEventContext(context) ? context : {};
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
    return { event: undefined, context: ctx, enqueuedAt: at, version, error: 'stored body has no event payload object', extras };
  }
  // The hash field holds the id; the body leaves it out (and a 0.1 body holds it already).
  return { event: { ...(payload as Record<string, unknown>), id }, context: ctx, enqueuedAt: at, version, extras };
}

/**
 * `body` (a stored body, its version prefix included) with `extras` in place
 * of those it held, the rest as it was. Undefined when the body is no array
 * of at least two elements (then it is left as it is).
 */
export function bodyWithExtras(body: string, extras: BodyExtras): string | undefined {
  const { version, json } = splitBodyVersion(body);
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length < 2) return undefined;
  const extra = formatExtras(extras);
  const elements: unknown[] = parsed.slice(0, 3);
  if (extra !== undefined) {
    if (elements.length < 3 || elements[2] === null || typeof elements[2] !== 'object') elements[2] = {};
    elements[3] = extra;
  }
  return versionedBody(JSON.stringify(elements), version);
}
