import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export interface Line {
  readonly pid: number;
  readonly at: number;
  readonly accepted?: string;
  readonly status?: string;
  readonly resent?: boolean;
  readonly start?: string;
  readonly ok?: string;
  /** Scenario 8: the payload version a call ran, or a mutator stored. */
  readonly v?: number;
  /** Scenario 8: an id whose version `v` the mutator stored (status not 'duplicate'). */
  readonly stored?: string;
  /** Scenario 8: the mutator is done. */
  readonly mutated?: number;
  readonly attempt?: number;
  /** On start and ok lines: the delivery's enqueuedAt, which tells one stored event from the same id stored again. */
  readonly enq?: number;
  readonly group?: string;
  readonly ready?: boolean;
  readonly produced?: number;
  readonly closed?: boolean;
  /** The process is about to die of an error it did not handle. */
  readonly crashed?: string;
}

/** Service instances as separate Node processes (fault-worker.ts), every line they report, every kill. */
export class Fleet {
  readonly lines: Line[] = [];
  readonly kills: Array<{ pid: number; at: number }> = [];
  /** How each process that ended ended, for failure messages. */
  readonly exits = new Map<number, { code: number | null; signal: NodeJS.Signals | null }>();
  private readonly children = new Map<number, ChildProcess>();

  spawn(env: Record<string, string>): number {
    const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'fault-worker.ts')], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const pid = child.pid!;
    this.children.set(pid, child);
    child.once('exit', (code, signal) => {
      this.children.delete(pid);
      this.exits.set(pid, { code, signal });
    });
    createInterface({ input: child.stdout! }).on('line', (text) => {
      if (text.startsWith('{')) this.lines.push(JSON.parse(text) as Line);
    });
    return pid;
  }

  /** Resolves once `pid` has said it is ready to handle events. */
  async ready(pid: number, timeoutMs = 20_000): Promise<void> {
    await this.until(() => this.lines.some((l) => l.pid === pid && l.ready), `process ${pid} ready`, timeoutMs);
  }

  get alive(): number[] {
    return [...this.children.keys()];
  }

  kill(pid: number, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.children.get(pid);
    if (!child) return Promise.resolve();
    if (signal === 'SIGKILL') this.kills.push({ pid, at: Date.now() });
    return new Promise((resolve) => {
      // 'close', not 'exit': only then has the parent read every line the child wrote before it ended.
      child.once('close', () => resolve());
      process.kill(pid, signal);
    });
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.alive.map((pid) => this.kill(pid, 'SIGKILL')));
  }

  async until(check: () => boolean | Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

export interface LedgerReport {
  readonly accepted: number;
  readonly handled: number;
  readonly deadLettered: number;
  /** Accepted events neither handled successfully nor dead-lettered: must be 0. */
  readonly lost: string[];
  /** Events whose handler succeeded more than once, by what interrupted the earlier attempt. */
  readonly duplicates: number;
  readonly duplicatesAfterKill: number;
  readonly duplicatesAfterOutage: number;
  /** The earlier attempt's process lived but outran its lease (stalled, starved of CPU). */
  readonly duplicatesAfterStall: number;
  /**
   * Events that succeeded twice in the same attempt while the earlier claim
   * could still hold its lease, which only a double claim could cause: must be 0.
   */
  readonly sameAttemptTwice: string[];
  /**
   * Events run again in the same attempt after their lease ran out in Redis
   * unstarted: held ahead, started here, but Redis never got the start (nor
   * the success) before the lease ended, so the expiry spent no attempt
   * (docs/reliability.md, "Events claimed ahead"). A duplicate like any other
   * interrupted attempt; counted apart because its attempt number repeats.
   */
  readonly rerunUnstarted: string[];
  /**
   * Events started afresh (attempt 1, stored by another enqueue call) after a
   * success was recorded: one enqueue call (or its re-send) took effect twice.
   * Must be 0; not counted in sameAttemptTwice.
   */
  readonly enqueuedTwice: string[];
}

/**
 * The invariant: every accepted event was handled successfully at least once
 * or dead-lettered, no enqueue took effect twice (its event started afresh
 * after it succeeded), and a second success only ever comes from a later attempt
 * (or the same one, once its lease ran out unstarted in Redis's view),
 * handed out because the earlier one was interrupted (its process killed, Redis
 * unreachable, or its lease outrun). `outages` are windows in which Redis was
 * unreachable; `graceMs` is the lease.
 */
export function checkLedger(lines: readonly Line[], kills: Fleet['kills'], deadLettered: ReadonlySet<string>, outages: Array<{ from: number; to: number }>, graceMs: number): LedgerReport {
  const accepted = new Set(lines.filter((l) => l.accepted).map((l) => l.accepted!));
  const oks = new Map<string, Line[]>();
  for (const line of lines) if (line.ok) oks.set(line.ok, [...(oks.get(line.ok) ?? []), line]);
  const lost = [...accepted].filter((id) => !oks.has(id) && !deadLettered.has(id));
  const killed = (ok: Line) => kills.some((k) => k.pid === ok.pid && k.at >= ok.at && k.at - ok.at <= graceMs);
  const cutOff = (ok: Line) => outages.some((o) => ok.at >= o.from - graceMs && ok.at <= o.to + graceMs);
  const duplicated = [...oks].filter(([, list]) => list.length > 1);
  const first = (list: Line[]) => list[0]!;
  const starts = new Map<string, Line[]>();
  for (const line of lines) if (line.start) starts.set(line.start, [...(starts.get(line.start) ?? []), line]);
  // A start of attempt 1 after the event's first success, of another enqueue (its enqueuedAt differs): the event was created again.
  const enqueuedTwice = duplicated.filter(([id, list]) => (starts.get(id) ?? []).some((l) => l.attempt === 1 && l.at > first(list).at && l.enq !== first(list).enq)).map(([id]) => id);
  const recreated = new Set(enqueuedTwice);
  // The same attempt of the same stored event succeeded twice. An event held ahead starts within half
  // its lease of being claimed (a quarter of leaseGraceMs, in practice), so runs of one claim start
  // less than half a lease apart; a run that starts later came after a lease that ran out unstarted,
  // which only a start mark that never reached Redis explains: the first run's process was killed,
  // or Redis was out of its reach, around then.
  const repeated = duplicated.filter(([id, list]) => !recreated.has(id) && new Set(list.map((l) => l.attempt)).size < list.length);
  const afterUnstartedExpiry = ([id, list]: [string, Line[]]) =>
    (killed(first(list)) || cutOff(first(list))) &&
    list.every((ok) => {
      const runs = (starts.get(id) ?? []).filter((l) => l.attempt === ok.attempt && l.enq === ok.enq);
      return runs.every((run, i) => i === 0 || run.at - runs[i - 1]!.at >= graceMs / 2);
    });
  return {
    accepted: accepted.size,
    handled: oks.size,
    deadLettered: deadLettered.size,
    lost,
    duplicates: duplicated.length,
    duplicatesAfterKill: duplicated.filter(([, list]) => killed(first(list))).length,
    duplicatesAfterOutage: duplicated.filter(([, list]) => !killed(first(list)) && cutOff(first(list))).length,
    duplicatesAfterStall: duplicated.filter(([, list]) => !killed(first(list)) && !cutOff(first(list))).length,
    sameAttemptTwice: repeated.filter((entry) => !afterUnstartedExpiry(entry)).map(([id]) => id),
    rerunUnstarted: repeated.filter(afterUnstartedExpiry).map(([id]) => id),
    enqueuedTwice,
  };
}
