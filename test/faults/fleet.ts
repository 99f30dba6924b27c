import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export interface Line {
  readonly pid: number;
  readonly at: number;
  readonly accepted?: string;
  readonly start?: string;
  readonly ok?: string;
  readonly attempt?: number;
  readonly ready?: boolean;
  readonly produced?: number;
  readonly closed?: boolean;
}

/** Service instances as separate Node processes (fault-worker.ts), every line they report, every kill. */
export class Fleet {
  readonly lines: Line[] = [];
  readonly kills: Array<{ pid: number; at: number }> = [];
  private readonly children = new Map<number, ChildProcess>();

  spawn(env: Record<string, string>): number {
    const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'fault-worker.ts')], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const pid = child.pid!;
    this.children.set(pid, child);
    child.once('exit', () => this.children.delete(pid));
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
      child.once('exit', () => resolve());
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
  /** Events whose handler succeeded more than once. */
  readonly duplicates: number;
  /** Duplicates no interrupted attempt explains (the earlier success's process was neither killed nor cut off from Redis right after): must be 0. */
  readonly unexplainedDuplicates: string[];
}

/**
 * The invariant: every accepted event was handled successfully at least once
 * or dead-lettered, and a second success only follows an interrupted attempt.
 * `outages` are windows in which Redis was unreachable (a success then may not
 * have been recorded); `graceMs` covers the lease of the interrupted attempt.
 */
export function checkLedger(lines: readonly Line[], kills: Fleet['kills'], deadLettered: ReadonlySet<string>, outages: Array<{ from: number; to: number }>, graceMs: number): LedgerReport {
  const accepted = new Set(lines.filter((l) => l.accepted).map((l) => l.accepted!));
  const oks = new Map<string, Line[]>();
  for (const line of lines) if (line.ok) oks.set(line.ok, [...(oks.get(line.ok) ?? []), line]);
  const lost = [...accepted].filter((id) => !oks.has(id) && !deadLettered.has(id));
  const interrupted = (ok: Line) =>
    kills.some((k) => k.pid === ok.pid && k.at >= ok.at && k.at - ok.at <= graceMs) || outages.some((o) => ok.at >= o.from - graceMs && ok.at <= o.to + graceMs);
  const duplicated = [...oks].filter(([, list]) => list.length > 1);
  const unexplainedDuplicates = duplicated.filter(([, list]) => !list.slice(0, -1).every(interrupted)).map(([id]) => id);
  return { accepted: accepted.size, handled: oks.size, deadLettered: deadLettered.size, lost, duplicates: duplicated.length, unexplainedDuplicates };
}
