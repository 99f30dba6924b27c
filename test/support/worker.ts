import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export interface WorkerLine {
  ready?: boolean;
  started?: string;
  finished?: string;
  attempt?: number;
  metric?: string;
  tags?: Record<string, string>;
  /** Other lines, as the process at hand reports them (test/support/versioned-process.ts). */
  [field: string]: unknown;
}

/** A service in a child process (test/support/worker-process.ts), killable by PID. */
export class Worker {
  readonly lines: WorkerLine[] = [];
  private readonly child: ChildProcess;
  private readonly listeners = new Set<() => void>();

  constructor(env: Record<string, string>, script = 'worker-process.ts') {
    this.child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, script)], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    createInterface({ input: this.child.stdout! }).on('line', (text) => {
      if (!text.startsWith('{')) return;
      this.lines.push(JSON.parse(text) as WorkerLine);
      for (const listener of this.listeners) listener();
    });
  }

  /** Resolves with the first line (seen so far or to come) that matches. */
  waitForLine(match: (line: WorkerLine) => boolean, timeoutMs = 20_000): Promise<WorkerLine> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.lines.find(match);
        if (!found) return;
        clearTimeout(timer);
        this.listeners.delete(check);
        resolve(found);
      };
      const timer = setTimeout(() => {
        this.listeners.delete(check);
        reject(new Error(`worker did not report the expected line within ${timeoutMs} ms; saw ${JSON.stringify(this.lines)}`));
      }, timeoutMs);
      this.listeners.add(check);
      check();
    });
  }

  /** The child's process id (its service's, as instances() reports it). */
  get pid(): number {
    return this.child.pid!;
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      // 'close', not 'exit': only then has every line the child wrote been read.
      this.child.once('close', () => resolve());
      process.kill(this.child.pid!, signal);
    });
  }
}
