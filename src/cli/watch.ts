import { typesWithin } from './commands';
import type { EventCounts, EventTypeInfo } from '../index';
import type { Context } from './commands';
import { absolute, count, table } from './format';

export interface WatchOptions {
  /** Redraw every this many ms. */
  readonly intervalMs: number;
  /** Only these types (default: every type found, looked for again every 10 s). */
  readonly types: readonly string[];
  /** Clear the screen before each frame (a terminal); else frames follow each other. */
  readonly redraw: boolean;
  /**
   * Writes raw bytes to the terminal: the screen-clearing sequence, which
   * ctx.out would escape with the stored text it prints.
   */
  readonly writeRaw: (bytes: string) => void;
  /** Resolves when the user asks to stop (SIGINT). */
  readonly stopped: Promise<void>;
}

interface Sample {
  readonly at: number;
  readonly counts: ReadonlyMap<string, EventCounts>;
}

const RESCAN_MS = 10_000;
const CLEAR = '\x1b[H\x1b[2J';

/** Change per second of one count between two samples: `+12/s`, `-3/s`, or '' when it held still. */
function rate(now: number, before: number | undefined, seconds: number): string {
  if (before === undefined || seconds <= 0 || now === before) return '';
  const perSecond = (now - before) / seconds;
  const shown = Math.abs(perSecond) >= 10 ? Math.round(perSecond) : Math.round(perSecond * 10) / 10;
  return `${shown > 0 ? '+' : ''}${shown.toLocaleString('en-US')}/s`;
}

/**
 * A live view of counts per type and how fast they change, redrawn every
 * interval until `stopped` resolves. With --json, one JSON line per interval.
 */
export async function watch(ctx: Context, options: WatchOptions): Promise<void> {
  let stop = false;
  let wake: (() => void) | undefined;
  void options.stopped.then(() => {
    stop = true;
    wake?.();
  });
  let found: EventTypeInfo[] = [];
  let scannedAt = Number.NEGATIVE_INFINITY;
  let previous: Sample | undefined;
  while (!stop) {
    const started = Date.now();
    if (options.types.length === 0 && started - scannedAt >= RESCAN_MS) {
      found = await typesWithin(ctx);
      scannedAt = started;
    }
    const names = options.types.length > 0 ? options.types : found.map((t) => t.type);
    const sampled = await Promise.all(names.map(async (type) => ({ type, counts: await ctx.service.counts(type), paused: await ctx.service.isPaused(type) })));
    const at = Date.now();
    const sample: Sample = { at, counts: new Map(sampled.flatMap((s) => (s.counts ? [[s.type, s.counts] as const] : []))) };
    const seconds = previous ? (at - previous.at) / 1_000 : 0;
    const rows = sampled.map(({ type, counts, paused }) => {
      const before = previous?.counts.get(type);
      const c = counts ?? { scheduled: 0, ready: 0, inFlight: 0, dead: 0, waiting: 0 };
      const rates = {
        scheduled: rate(c.scheduled, before?.scheduled, seconds),
        ready: rate(c.ready, before?.ready, seconds),
        inFlight: rate(c.inFlight, before?.inFlight, seconds),
        dead: rate(c.dead, before?.dead, seconds),
      };
      return { type, paused, counts: c, rates };
    });
    if (stop) break;
    if (ctx.json) {
      ctx.out(JSON.stringify({ at: new Date(at).toISOString(), types: rows }));
    } else {
      const cell = (n: number, r: string) => (r ? `${count(n)} (${r})` : count(n));
      const frame = [
        `delayed-events watch: prefix '${ctx.prefix}', ${absolute(at)}; Ctrl-C to stop`,
        '',
        rows.length === 0
          ? `no event types under prefix '${ctx.prefix}' yet`
          : table(
              ['TYPE', 'SCHEDULED', 'READY', 'IN FLIGHT', 'DEAD', 'PAUSED'],
              rows.flatMap((r) => [
                [
                  r.type,
                  cell(r.counts.scheduled, r.rates.scheduled),
                  cell(r.counts.ready, r.rates.ready),
                  cell(r.counts.inFlight, r.rates.inFlight),
                  cell(r.counts.dead, r.rates.dead),
                  r.paused ? 'yes' : 'no',
                ],
                // A named group's states are its own: its dead letters are not the type's.
                ...Object.entries(r.counts.groups ?? {})
                  .filter(([group]) => group !== 'default')
                  .map(([group, g]) => [`  ↳ ${group}`, count(g.scheduled), count(g.ready), count(g.inFlight), count(g.dead), r.paused ? 'yes' : 'no']),
              ]),
            ),
      ].join('\n');
      if (options.redraw) options.writeRaw(CLEAR);
      ctx.out(options.redraw ? frame : `${frame}\n`);
    }
    previous = sample;
    const wait = Math.max(0, options.intervalMs - (Date.now() - started));
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, wait);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
