/** How the CLI shows times, counts and tables to a person; --json output is not formatted here. */

const UNITS: ReadonlyArray<[string, number]> = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1_000],
];

/** A span as its two largest units: `2h 59m`, `3m`, `45s`, `1d 4h`; under a second, `<1s`. */
export function span(ms: number): string {
  let left = Math.abs(ms);
  if (left < 1_000) return '<1s';
  const parts: string[] = [];
  for (const [unit, size] of UNITS) {
    if (parts.length === 2) break;
    const n = Math.floor(left / size);
    left -= n * size;
    if (n > 0) parts.push(`${n}${unit}`);
    else if (parts.length > 0) break; // `3m`, not `3m 0s`
  }
  return parts.join(' ');
}

/** `in 2h 59m`, `3m ago`, or `now` within a second. */
export function relative(at: Date | number, now = Date.now()): string {
  const ms = (typeof at === 'number' ? at : at.getTime()) - now;
  if (Math.abs(ms) < 1_000) return 'now';
  return ms > 0 ? `in ${span(ms)}` : `${span(ms)} ago`;
}

/** `2026-12-01 09:00:00Z`: UTC, to the second. */
export function absolute(at: Date | number): string {
  const date = typeof at === 'number' ? new Date(at) : at;
  if (Number.isNaN(date.getTime())) return '-';
  return date
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z');
}

/** Absolute and relative: `2026-12-01 09:00:00Z (in 2h 59m)`. */
export function when(at: Date | number | undefined, now = Date.now()): string {
  if (at === undefined) return '-';
  return `${absolute(at)} (${relative(at, now)})`;
}

/** 1234567 -> `1,234,567`. */
export function count(n: number): string {
  return n.toLocaleString('en-US');
}

/**
 * Control characters (C0, DEL, C1), bidirectional overrides and invisible
 * format characters: in stored text (ids, errors, payloads) they could clear
 * the screen, set the title, plant links or make an id read as another.
 */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]/g;
const UNPRINTABLE_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]/g;

const escaped = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** Stored text as the terminal may show it: every control or invisible character written as \uXXXX, newlines too. */
export function shown(text: string): string {
  return text.replace(UNPRINTABLE, escaped);
}

/** A whole output as the terminal may show it: like shown(), but its own line breaks stay. */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE_BUT_NEWLINE, escaped);
}

/** Columns padded to their widest cell, two spaces apart; counts (with their rates) right-aligned. Cells are shown(). */
export function table(headers: readonly string[], cells: ReadonlyArray<readonly string[]>): string {
  const rows = cells.map((row) => row.map(shown));
  const widths = headers.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? '').length)));
  const numeric = headers.map((_, c) => rows.length > 0 && rows.every((r) => /^[\d,.+\-/s() ]*$/.test(r[c] ?? '') && /^\d/.test(r[c] ?? '')));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, c) => (numeric[c] ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** A value on one line, cut to `max` characters. */
export function oneLine(text: string, max = 80): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** JSON as --json prints it: two-space indent, Dates as ISO strings. */
export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
