export function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** `in 3 min`, `12 s ago`: how far a time is from now. */
export function relative(iso: string | undefined, now = Date.now()): string {
  if (!iso) return '';
  const ms = new Date(iso).getTime() - now;
  const abs = Math.abs(ms);
  const text =
    abs < 1_000
      ? `${abs} ms`
      : abs < 60_000
        ? `${Math.round(abs / 1_000)} s`
        : abs < 3_600_000
          ? `${Math.round(abs / 60_000)} min`
          : abs < 86_400_000
            ? `${(abs / 3_600_000).toFixed(1)} h`
            : `${(abs / 86_400_000).toFixed(1)} d`;
  return ms >= 0 ? `in ${text}` : `${text} ago`;
}

export function absolute(iso: string | undefined): string {
  if (!iso) return '';
  const date = new Date(iso);
  return `${date
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC')}`;
}

/** A payload or context as indented JSON text (shown as text, never as markup). */
export function pretty(value: unknown): string {
  if (value === undefined) return '';
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

export const STATE_LABEL: Readonly<Record<string, string>> = { scheduled: 'Scheduled', ready: 'Ready', 'in-flight': 'In flight', dead: 'Dead' };
