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

export const STATE_LABEL: Readonly<Record<string, string>> = { scheduled: 'Scheduled', ready: 'Ready', 'in-flight': 'In flight', dead: 'Dead', handled: 'Handled', waiting: 'Waiting' };

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

/** A duration in words: 5 s, 15 min, 2 h, 1 d. */
export function span(ms: number): string {
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000} d`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms % 1_000 === 0) return `${ms / 1_000} s`;
  return `${ms} ms`;
}

/**
 * A recurring schedule's spec as a person reads it: "every 5 s", or for the
 * common cron shapes "09:00 Mon–Fri Europe/Paris", "03:30 daily UTC"; any
 * other cron is shown as written, with its zone.
 */
export function readableSpec(spec: { readonly every: number } | { readonly cron: string; readonly tz: string }): string {
  if ('every' in spec) return `every ${span(spec.every)}`;
  const fields = spec.cron.trim().split(/\s+/);
  if (fields.length === 5) {
    const [minute, hour, dom, month, dow] = fields as [string, string, string, string, string];
    if (/^\d+$/.test(minute) && /^\d+$/.test(hour) && dom === '*' && month === '*') {
      const time = `${hour.padStart(2, '0')}:${minute.padStart(2, '0')}`;
      if (dow === '*') return `${time} daily ${spec.tz}`;
      const range = /^(\d)-(\d)$/.exec(dow);
      if (range) return `${time} ${DAYS[Number(range[1]) % 7]}–${DAYS[Number(range[2]) % 7]} ${spec.tz}`;
      if (/^\d(,\d)*$/.test(dow))
        return `${time} ${dow
          .split(',')
          .map((d) => DAYS[Number(d) % 7])
          .join(', ')} ${spec.tz}`;
    }
  }
  return `cron ${spec.cron} ${spec.tz}`;
}

/** A schedule's policy in a few words (since 0.6), '–' when it has none. */
export function schedulePolicy(s: {
  readonly overlap?: string;
  readonly limit?: number;
  readonly remaining?: number;
  readonly immediately?: boolean;
  readonly jitterMs?: number;
  readonly pauseOnFailure?: boolean;
}): string {
  const parts = [
    s.overlap && s.overlap !== 'allow' ? `overlap ${s.overlap}` : '',
    s.limit !== undefined ? `limit ${s.limit} (${s.remaining ?? 0} left)` : '',
    s.immediately ? 'immediately' : '',
    s.jitterMs ? `jitter ${s.jitterMs} ms` : '',
    s.pauseOnFailure ? 'pause on failure' : '',
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(', ') : '–';
}
