/** A stored event as read back: the value of its field in the meta hash, split. */
export interface Envelope {
  /** Attempts made before this value was written (0: never handled). */
  readonly attempt: number;
  readonly dueAt: number;
  readonly body: string;
}

/**
 * Splits `attempt|due|body` (lua/includes/envelope-parse.lua writes it). A value
 * without that header (corrupted by hand) reads as attempt 0, due 0, the whole
 * value as body, as envelope_parse reads it in the scripts: it then fails to
 * decode and is dead-lettered with the value as evidence.
 */
export function parseEnvelope(value: string): Envelope {
  const first = digitsThenBar(value, 0);
  const second = first < 0 ? -1 : digitsThenBar(value, first + 1);
  if (second < 0) return { attempt: 0, dueAt: 0, body: value };
  return { attempt: Number(value.slice(0, first)), dueAt: Number(value.slice(first + 1, second)), body: value.slice(second + 1) };
}

/** Index of the '|' ending a run of at least one digit that starts at `from`; -1 if there is none. */
function digitsThenBar(value: string, from: number): number {
  let i = from;
  for (; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 48 || c > 57) break;
  }
  return i > from && value.charCodeAt(i) === 124 ? i : -1;
}
