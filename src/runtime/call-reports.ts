import type { LuaScripts } from '../redis/lua-scripts';
import type { TypeKeys } from '../redis/redis-layout';
import type { DeliveryReports, ReportedCall } from './delivery-reports';
import { type ChildResult, childResultsOf } from '../redis/flow-store';
import { METRIC, type Metrics } from './metrics';

/** How often at most a queue's reports are written: a handler reporting in a tight loop costs a few writes a second. */
export const REPORT_EVERY_MS = 250;
/** Log lines kept per event (lua/report-calls.lua keeps as many). */
export const LOG_LINES_KEPT = 100;

interface Pending {
  readonly ref: ReportedCall;
  readonly attempt: number;
  progress: string;
  lines: string[];
}

/** Reports per script call: few enough for one Lua unpack and a short script. */
const REPORT_STEP = 200;

/**
 * What running calls of one handler reported (delivery.progress, delivery.log;
 * since 0.6), coalesced: the last progress and the new lines of each call are
 * written together at most every REPORT_EVERY_MS, in one script call per
 * queue (lua/report-calls.lua), fenced by each call's claim. Best effort: a write
 * that fails is counted and dropped; a call's own reports are written before
 * its result (written()), so its log lines are there for its next attempt.
 */
export class CallReports implements DeliveryReports {
  private readonly pending = new Map<ReportedCall, Pending>();
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  /** Stopped (close): what a call given up reports afterwards is dropped, and no timer is left. */
  private stopped = false;

  constructor(
    private readonly scripts: LuaScripts,
    private readonly metrics: Metrics,
  ) {}

  progress(ref: ReportedCall, attempt: number, json: string): void {
    if (this.stopped) return;
    this.of(ref, attempt).progress = json;
    this.soon();
  }

  log(ref: ReportedCall, attempt: number, line: string): void {
    if (this.stopped) return;
    const pending = this.of(ref, attempt);
    pending.lines.push(line);
    if (pending.lines.length > LOG_LINES_KEPT) pending.lines.shift();
    this.soon();
  }

  async childResults(ref: ReportedCall): Promise<Readonly<Record<string, ChildResult>>> {
    return childResultsOf(await this.scripts.call('flow-record', ref.keys, { id: ref.id }));
  }

  /** Resolves once what `ref`'s call reported is written (or dropped): before its result. Nothing to wait for, most of the time. */
  written(ref: ReportedCall): Promise<void> | undefined {
    if (!this.pending.has(ref)) return undefined;
    return this.flush();
  }

  /** Writes what waits now; later reports are not coalesced into a write after stop. */
  stop(): Promise<void> {
    this.stopped = true;
    return this.flush();
  }

  private of(ref: ReportedCall, attempt: number): Pending {
    let pending = this.pending.get(ref);
    if (!pending) this.pending.set(ref, (pending = { ref, attempt, progress: '', lines: [] }));
    return pending;
  }

  private soon(): void {
    this.timer ??= setTimeout(() => void this.flush(), REPORT_EVERY_MS).unref();
  }

  private flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const taken = [...this.pending.values()];
    this.pending.clear();
    // One write at a time, in order: a call's lines land in the order it logged them.
    this.writing = this.writing.then(() => this.write(taken));
    return this.writing;
  }

  private async write(taken: readonly Pending[]): Promise<void> {
    const byQueue = new Map<TypeKeys, Pending[]>();
    for (const p of taken) {
      const list = byQueue.get(p.ref.keys);
      if (list) list.push(p);
      else byQueue.set(p.ref.keys, [p]);
    }
    await Promise.all([...byQueue].map(([keys, list]) => this.writeQueue(keys, list)));
  }

  private async writeQueue(keys: TypeKeys, taken: readonly Pending[]): Promise<void> {
    for (let from = 0; from < taken.length; from += REPORT_STEP) {
      const reports = taken.slice(from, from + REPORT_STEP).map((p) => ({
        id: p.ref.id,
        claim: p.ref.claim,
        attempt: p.attempt,
        progress: p.progress,
        lines: p.lines.length > 0 ? JSON.stringify(p.lines) : '',
      }));
      try {
        await this.scripts.call('report-calls', keys, { reports });
      } catch {
        this.metrics.count(METRIC.redisErrors, { loop: 'reports', type: keys.type });
      }
    }
  }
}
