/**
 * What an event carries beside its payload and context (since 0.6): its own
 * attempt count (`enqueue(..., { maxAttempts })`), its priority and how many
 * times a handler snoozed it. Stored as a fourth element of the body's JSON array,
 * a string such as `"rde;a=5;s=2"`: an instance of 0.5 reads the first
 * three elements only, so it handles such an event as before, with its
 * handler's attempts. The Lua scripts find `a` at the end of a body without
 * parsing the JSON (lua/includes/event-attempts.lua): a payload or context is
 * an object, so only this element ends a body with `"]`.
 */
export interface BodyExtras {
  /** The event's own attempts, overriding the handler policy's. */
  readonly maxAttempts?: number;
  /** How many times a handler snoozed it so far. */
  readonly snoozes?: number;
  /** Its priority when above 0 (0 is the best; since 0.6). */
  readonly priority?: number;
  /**
   * Set on an event stored by a debounce (since 0.6): its burst's maxWaitMs,
   * 0 when it has none. lua/includes/enqueue-policy.lua reads and rewrites it.
   */
  readonly maxWaitMs?: number;
  /** Its own idempotency window, ms (`dedupe: { windowMs }`, since 0.6): completions and cancels mark it for that long. */
  readonly dedupeWindowMs?: number;
}

const TAG = 'rde';

/** How long an event with a priority has been due before it is served as the best, by default and at most (priorityAgingMs). */
export const DEFAULT_PRIORITY_AGING_MS = 60_000;
export const MAX_PRIORITY_AGING_MS = 30 * 24 * 3_600_000;

/** The string stored for `extras`, or undefined when there is nothing to store. */
export function formatExtras(extras: BodyExtras): string | undefined {
  let text = TAG;
  // The burst and window fields go first: the Lua scripts read a, s and p within the body's last 48 characters.
  if (extras.maxWaitMs !== undefined) text += `;w=${extras.maxWaitMs}`;
  if (extras.dedupeWindowMs !== undefined) text += `;i=${extras.dedupeWindowMs}`;
  if (extras.maxAttempts !== undefined) text += `;a=${extras.maxAttempts}`;
  if (extras.snoozes !== undefined && extras.snoozes > 0) text += `;s=${extras.snoozes}`;
  if (extras.priority !== undefined && extras.priority > 0) text += `;p=${extras.priority}`;
  return text === TAG ? undefined : text;
}

/** The extras an element of a body holds; none for anything else (an older body, a hand-written one). */
export function parseExtras(element: unknown): BodyExtras {
  if (typeof element !== 'string' || !element.startsWith(TAG)) return {};
  const extras: { maxAttempts?: number; snoozes?: number; priority?: number; maxWaitMs?: number; dedupeWindowMs?: number } = {};
  for (const field of element.split(';').slice(1)) {
    const [name, value] = field.split('=');
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n < 0) continue;
    if (name === 'a' && n >= 1) extras.maxAttempts = n;
    else if (name === 's') extras.snoozes = n;
    else if (name === 'p' && n > 0) extras.priority = n;
    else if (name === 'w') extras.maxWaitMs = n;
    else if (name === 'i') extras.dedupeWindowMs = n;
  }
  return extras;
}
