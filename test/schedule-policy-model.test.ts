import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { occurrenceAtOrAfter } from '../src/core/recurrence';
import { checkPolicy, jitterOf, overlapStep } from '../src/core/schedule-policy';

/**
 * A recurring schedule's policy decisions, without Redis: the overlap step
 * against a model of looks (occurrences falling due, the running one
 * finishing, decisions arriving late), jitter, and what an hourly cron and an
 * interval do across both daylight-saving switches (a fake clock: the times
 * are given, not read).
 */
describe("a schedule's overlap policy, against a model", () => {
  const steps = fc.array(fc.oneof(fc.record({ kind: fc.constant('due' as const), count: fc.integer({ min: 0, max: 3 }) }), fc.record({ kind: fc.constant('finish' as const) })), { maxLength: 60 });

  for (const overlap of ['skip', 'buffer-one'] as const) {
    it(`'${overlap}': one occurrence at a time, each due one run once or skipped, at most one waiting, in order`, () => {
      fc.assert(
        fc.property(steps, (timeline) => {
          let next = 0;
          let live: number | null = null;
          let buffered: number | null = null;
          const ran: number[] = [];
          let skipped = 0;
          let due = 0;
          for (const step of timeline) {
            if (step.kind === 'finish') {
              live = null;
            }
            const falling = step.kind === 'due' ? Array.from({ length: step.count }, () => next++) : [];
            due += falling.length;
            const decided = overlapStep(overlap, falling, live !== null, buffered);
            // The look runs at most one (its previous still live, what it starts is live now), or the waiting one and none more.
            expect(decided.run.length).toBeLessThanOrEqual(1);
            if (decided.run.length > 0) {
              expect(live).toBeNull();
              live = decided.run[0]!;
              ran.push(live);
            }
            if (overlap === 'skip') expect(decided.buffered).toBeNull();
            buffered = decided.buffered;
            skipped += decided.skipped;
          }
          // Accounting: every occurrence that fell due ran, was skipped, or still waits; none twice; oldest first.
          expect(ran.length + skipped + (buffered === null ? 0 : 1)).toBe(due);
          expect(new Set(ran).size).toBe(ran.length);
          expect([...ran].sort((a, b) => a - b)).toEqual(ran);
          if (buffered !== null) expect(ran.every((at) => at < buffered!)).toBe(true);
        }),
        { numRuns: 500 },
      );
    });
  }

  it('a waiting occurrence runs as soon as the running one left, before anything due later', () => {
    expect(overlapStep('buffer-one', [5, 6], false, 3)).toEqual({ run: [3], skipped: 1, buffered: 5 });
    expect(overlapStep('buffer-one', [], false, 3)).toEqual({ run: [3], skipped: 0, buffered: null });
    expect(overlapStep('skip', [5, 6], false, null)).toEqual({ run: [5], skipped: 1, buffered: null });
    expect(overlapStep('skip', [5], true, null)).toEqual({ run: [], skipped: 1, buffered: null });
  });
});

describe('jitter', () => {
  it('is in [0, jitterMs), the same for one id in every instance, and spread over ids', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 40 }), fc.integer({ min: 1, max: 86_400_000 }), (id, jitterMs) => {
        const j = jitterOf(id, jitterMs);
        expect(j).toBeGreaterThanOrEqual(0);
        expect(j).toBeLessThan(jitterMs);
        expect(jitterOf(id, jitterMs)).toBe(j);
      }),
    );
    expect(jitterOf('x@1', 0)).toBe(0);
    const spread = new Set(Array.from({ length: 100 }, (_, k) => jitterOf(`nightly@${1_700_000_000_000 + k * 86_400_000}`, 60_000)));
    expect(spread.size).toBeGreaterThan(90);
  });

  it('policy options that are the defaults store nothing, so a schedule without a policy stores what 0.5 stored', () => {
    expect(checkPolicy({ overlap: 'allow', jitterMs: 0, immediately: false, pauseOnFailure: false }, 'latest')).toBeUndefined();
    expect(checkPolicy({ overlap: 'skip', limit: 3, jitterMs: 10, immediately: true, pauseOnFailure: true, catchUpWindowMs: 5 }, 'all')).toEqual({
      overlap: 'skip',
      limit: 3,
      jitterMs: 10,
      immediately: true,
      pauseOnFailure: true,
      catchUpWindowMs: 5,
    });
  });
});

describe('daylight saving, for an hourly cron and an interval', () => {
  /** The first `n` occurrences at or after `fromIso`, as UTC ISO times. */
  const hours = (tz: string, fromIso: string, n: number) => {
    const out: string[] = [];
    let from = Date.parse(fromIso);
    for (let i = 0; i < n; i++) {
      const at = occurrenceAtOrAfter({ cron: '0 * * * *', tz }, {}, 0, from)!;
      out.push(new Date(at).toISOString());
      from = at + 1;
    }
    return out;
  };
  const everyHour = (fromIso: string, n: number) => Array.from({ length: n }, (_, k) => new Date(Date.parse(fromIso) + k * 3_600_000).toISOString());

  it('an hourly cron runs once every real hour across both switches in Paris and New York: none skipped, none twice', () => {
    // Paris springs forward on 29 March 2026 (02:00 -> 03:00): local 02:00 does not exist, and no real hour is lost.
    expect(hours('Europe/Paris', '2026-03-28T23:30:00Z', 5)).toEqual(everyHour('2026-03-29T00:00:00.000Z', 5));
    // Paris falls back on 25 October 2026 (03:00 -> 02:00): local 02:00 happens twice, each a real hour of its own.
    expect(hours('Europe/Paris', '2026-10-24T23:30:00Z', 5)).toEqual(everyHour('2026-10-25T00:00:00.000Z', 5));
    expect(hours('America/New_York', '2026-03-08T05:30:00Z', 5)).toEqual(everyHour('2026-03-08T06:00:00.000Z', 5));
    expect(hours('America/New_York', '2026-11-01T04:30:00Z', 5)).toEqual(everyHour('2026-11-01T05:00:00.000Z', 5));
  });

  it('an hourly cron runs 23 times on the spring day and 25 on the autumn day, in local time', () => {
    /** The runs between two instants, by a fake clock that steps from one occurrence to the next. */
    const runs = (tz: string, fromIso: string, toIso: string) => {
      let count = 0;
      for (
        let at = occurrenceAtOrAfter({ cron: '0 * * * *', tz }, {}, 0, Date.parse(fromIso));
        at !== undefined && at < Date.parse(toIso);
        at = occurrenceAtOrAfter({ cron: '0 * * * *', tz }, {}, 0, at + 1)
      )
        count++;
      return count;
    };
    // Local midnight to midnight, as UTC instants.
    expect(runs('Europe/Paris', '2026-03-28T23:00:00Z', '2026-03-29T22:00:00Z')).toBe(23);
    expect(runs('Europe/Paris', '2026-10-24T22:00:00Z', '2026-10-25T23:00:00Z')).toBe(25);
    expect(runs('America/New_York', '2026-03-08T05:00:00Z', '2026-03-09T04:00:00Z')).toBe(23);
    expect(runs('America/New_York', '2026-11-01T04:00:00Z', '2026-11-02T05:00:00Z')).toBe(25);
    expect(runs('Europe/Paris', '2026-06-01T22:00:00Z', '2026-06-02T22:00:00Z')).toBe(24);
  });

  it('an interval counts real time: every 1 hour is 3,600,000 ms apart through both switches', () => {
    for (const from of ['2026-03-28T22:00:00Z', '2026-10-24T22:00:00Z', '2026-03-08T03:00:00Z', '2026-11-01T02:00:00Z']) {
      const anchor = Date.parse(from);
      let at = anchor;
      for (let k = 1; k <= 8; k++) {
        const next = occurrenceAtOrAfter({ every: 3_600_000 }, {}, anchor, at + 1)!;
        expect(next - at).toBe(3_600_000);
        at = next;
      }
    }
  });
});
