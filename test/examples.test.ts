import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from './support/redis-server';
import { waitFor } from './support/wait-for';

const ROOT = join(__dirname, '..');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');

interface Run {
  readonly child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code once the process ended and every line it wrote was read. */
  readonly exited: Promise<number | null>;
}

/** Runs an example as a user would (`npx tsx examples/<file>`), killing it if it outlives `timeoutMs`. */
function runExample(file: string, env: Record<string, string | undefined>, timeoutMs = 30_000): Run {
  const child = spawn(TSX, [join('examples', file)], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`examples/${file} did not exit within ${timeoutMs} ms; output:\n${output}`));
    }, timeoutMs);
    child.once('error', reject);
    // 'close', not 'exit': only then has everything it wrote been read.
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
  return { child, output: () => output, exited };
}

/** The docs quote the examples as an app would write them: importing the package, not ../src. */
function asQuoted(file: string): string {
  return readFileSync(join(ROOT, 'examples', file), 'utf8').replaceAll("from '../src'", "from 'reactive-delayed-events'");
}

describe('examples', () => {
  let server: RedisServer;

  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('quick-start.ts handles its event and exits 0 by itself', async () => {
    const run = runExample('quick-start.ts', { REDIS_URL: server.url });
    const code = await run.exited;
    expect(run.output()).toMatch(/enqueued: scheduled/);
    expect(run.output()).toMatch(/handled order-\d+: 1999 cents for acme, attempt 1/);
    expect(run.output()).toMatch(/closed/);
    expect(code).toBe(0);
  });

  it('http-service.ts maps enqueue results to HTTP statuses, handles the event, and closes on SIGTERM', async () => {
    const run = runExample('http-service.ts', { REDIS_URL: server.url, PORT: '0' });
    try {
      const base = (await waitFor(() => /listening on (http:\/\/\S+)/.exec(run.output())?.[1], 'the server to listen', 20_000)) as string;
      const post = async (body: unknown) => {
        const response = await fetch(`${base}/reminders`, { method: 'POST', body: JSON.stringify(body) });
        return { status: response.status, body: (await response.json()) as { status?: string; error?: string } };
      };
      const reminder = { id: 'r-1', userId: 'u-7', text: 'renew your plan', delayMs: 200 };
      expect(await post(reminder)).toEqual({ status: 202, body: { status: 'scheduled' } });
      // Sending the same request again is safe: the id is already stored.
      expect(await post(reminder)).toEqual({ status: 200, body: { status: 'duplicate' } });
      expect((await post({ userId: 'u-7' })).status).toBe(400);
      expect((await post({ id: 'r-2', delayMs: -1 })).status).toBe(400);
      expect((await fetch(`${base}/ready`)).status).toBe(200);
      await waitFor(() => run.output().includes('reminder r-1 for u-7: renew your plan'), 'the reminder handled');
      run.child.kill('SIGTERM');
      expect(await run.exited).toBe(0);
      expect(run.output()).toMatch(/closed/);
    } finally {
      if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    }
  });

  it('demo.ts (npm run demo) shows events handled, retried and dead-lettered, with REDIS_URL', async () => {
    const run = runExample('demo.ts', { REDIS_URL: server.url });
    expect(await run.exited).toBe(0);
    expect(run.output()).toMatch(/payment pay-1 checked/);
    expect(run.output()).toMatch(/dead letter: pay-broken after 3 attempts/);
    expect(run.output()).toMatch(/closed/);
  });

  it('demo.ts starts and stops a private redis-server when REDIS_URL is unset', async () => {
    const run = runExample('demo.ts', { REDIS_URL: undefined });
    expect(await run.exited).toBe(0);
    expect(run.output()).toMatch(/started a private redis-server/);
    expect(run.output()).toMatch(/closed/);
  });

  it('the docs quote the examples as they are', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const recipes = readFileSync(join(ROOT, 'docs', 'recipes.md'), 'utf8');
    expect(readme).toContain(asQuoted('quick-start.ts'));
    expect(recipes).toContain(asQuoted('http-service.ts'));
  });
});
