import 'reflect-metadata';
import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayedEvent, DelayedEventService, PermanentFailure, fixedBackoff } from '../src';
import { partitionOf } from '../src/redis/redis-layout';
import { useRedis } from './support/harness';
import { freePort } from './support/redis-server';
import { TcpProxy } from './support/tcp-proxy';
import { waitFor } from './support/wait-for';

@DelayedEvent('cli.payment')
class Payment {
  constructor(
    readonly id: string = '',
    readonly cents: number = 0,
  ) {}
}

@DelayedEvent('cli.ship', { partitions: 3 })
class Ship {
  constructor(readonly id: string = '') {}
}

const ROOT = join(__dirname, '..');
/**
 * src/cli/main.ts bundled once for this file (packages stay external, found in
 * node_modules): each run then starts in a fraction of what tsx takes to compile it.
 */
const CLI = join(ROOT, 'node_modules', '.cache', 'cli-test', `main-${process.pid}.cjs`);

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The CLI in a child process; stdin is a pipe, never a terminal. */
function run(args: readonly string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: ROOT,
      env: { ...process.env, REDIS_URL: undefined, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdin.end();
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('the delayed-events CLI', () => {
  const redis = useRedis();
  let prefix: string;
  let service: DelayedEventService;
  let release: () => void;
  const cli = (...args: string[]) => run(['--redis', redis.server.url, '--prefix', prefix, ...args]);

  /** Every key under the prefix with its DUMP: equal snapshots mean nothing changed. */
  const snapshot = () => redis.snapshot(prefix);

  beforeAll(async () => {
    await build({ entryPoints: [join(ROOT, 'src', 'cli', 'main.ts')], outfile: CLI, bundle: true, platform: 'node', format: 'cjs', target: 'node20', packages: 'external', logLevel: 'warning' });
    prefix = 'cli';
    // The service outlives the tests of this file: it holds the event in flight, for longer than the file
    // takes on a loaded machine (a timeout ending it would change what the snapshots compare).
    service = new DelayedEventService({ redis: redis.server.url, prefix, pollIntervalMs: 100, readerBlockMs: 1_000, watchdogGraceMs: 1_000, closeTimeoutMs: 5_000, handlerTimeoutMs: 600_000 });
    const gate = new Promise<void>((resolve) => (release = resolve));
    let running = false;
    service.addHandler(
      Payment,
      async (event) => {
        if (event.id.startsWith('dead')) throw new PermanentFailure('card declined');
        if (event.id === 'running') {
          running = true;
          await gate;
        }
      },
      1,
      // Claiming only for the free slot: the event behind the running one stays ready.
      { retry: fixedBackoff(3, 10), prefetch: 0 },
    );
    for (const id of ['dead-1', 'dead-2', 'dead-3']) await service.enqueue(new Payment(id, 1), 0);
    await waitFor(async () => (await service.counts(Payment))?.dead === 3, 'three dead letters');
    await service.enqueue(new Payment('running', 2), 0);
    await waitFor(() => running, 'the handler running');
    await service.enqueue(new Payment('ready-1', 3), 0);
    await waitFor(async () => (await service.counts(Payment))?.ready === 1, 'a ready event');
    await service.enqueue(new Payment('later', 1999), { hours: 3 }, { context: { tenant: 'acme' } });
    await service.enqueue(new Payment('sooner', 500), { hours: 2 });
    for (let i = 0; i < 5; i++) await service.enqueue(new Ship(`s${i}`), { minutes: 10 + i });
  });

  // Registered after useRedis's: it runs first, while the server is still up.
  afterAll(async () => {
    release?.();
    await service?.close();
    rmSync(CLI, { force: true });
  });

  it('types and stats: a table, or JSON', async () => {
    const [types, typesJson, stats, statsJson, one] = await Promise.all([cli('types'), cli('types', '--json'), cli('stats'), cli('--json', 'stats'), cli('stats', 'cli.payment', '--json')]);
    expect(types.code).toBe(0);
    expect(types.stdout).toMatch(/^TYPE\s+PARTITIONS\s+GROUPS\s+PAUSED\s+SCHEDULES\ncli\.payment\s+1\s+-\s+no\s+-\ncli\.ship\s+3\s+-\s+no\s+-\n$/);
    expect(JSON.parse(typesJson.stdout)).toEqual([
      { type: 'cli.payment', partitions: 1, groups: [], paused: false },
      { type: 'cli.ship', partitions: 3, groups: [], paused: false },
    ]);
    expect(stats.code).toBe(0);
    expect(stats.stdout).toMatch(/^TYPE\s+GROUP\s+SCHEDULED\s+READY\s+IN FLIGHT\s+DEAD\s+WAITING\s+PAUSED\ncli\.payment\s+-\s+2\s+1\s+1\s+3\s+0\s+no\ncli\.ship\s+-\s+5\s+0\s+0\s+0\s+0\s+no\n$/);
    expect(JSON.parse(statsJson.stdout)).toEqual([
      { type: 'cli.payment', paused: false, scheduled: 2, ready: 1, inFlight: 1, dead: 3, waiting: 0, oldestReadyMs: expect.any(Number) },
      { type: 'cli.ship', paused: false, scheduled: 5, ready: 0, inFlight: 0, dead: 0, waiting: 0 },
    ]);
    expect(JSON.parse(one.stdout)).toEqual({ type: 'cli.payment', paused: false, scheduled: 2, ready: 1, inFlight: 1, dead: 3, waiting: 0, oldestReadyMs: expect.any(Number) });
    const unknown = await cli('stats', 'cli.nothing');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no events, groups or pause of type 'cli\.nothing' under prefix 'cli'/);
  });

  it('list and show: each state, with absolute and relative times', async () => {
    const [scheduled, ready, inFlight, dead, json, ship] = await Promise.all([
      cli('list', 'cli.payment'),
      cli('list', 'cli.payment', '--state', 'ready'),
      cli('list', 'cli.payment', '--state', 'in-flight'),
      cli('list', 'cli.payment', '--state', 'dead', '--limit', '2'),
      cli('list', 'cli.payment', '--json'),
      cli('list', 'cli.ship', '--offset', '3'),
    ]);
    expect(scheduled.code).toBe(0);
    expect(scheduled.stdout).toMatch(
      /^ID\s+DUE\s+ATTEMPTS\s+ENQUEUED\nsooner\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(in 1h 59m\)\s+0\s+\S+ \S+ \((<1s|\d+s) ago|now\)\nlater\s+.*\(in 2h 59m\).*\n1-2 of 2 scheduled\n$/,
    );
    expect(ready.stdout).toMatch(/^ID\s+DUE\s+ATTEMPTS\s+PRIORITY\nready-1\s+.*\s0\n1-1 of 1 ready\n$/);
    expect(inFlight.stdout).toMatch(/^ID\s+ATTEMPT\s+LEASE EXPIRES\s+DUE\nrunning\s+1\s+\S+ \S+ \(in \d+[hms]( \d+[ms])?\)/);
    expect(dead.stdout).toMatch(
      /^ID\s+DEAD SINCE\s+ATTEMPTS\s+LAST ERROR\ndead-1\s+.* ago\)\s+1\s+permanent failure: card declined \(attempt 1 of 3\)\ndead-2 .*\n1-2 of 3 dead; --offset 2 for more\n$/,
    );
    const listed = JSON.parse(json.stdout) as Array<{ id: string; state: string; dueAt: string; event: { cents: number } }>;
    expect(listed.map((e) => [e.id, e.state, e.event.cents])).toEqual([
      ['sooner', 'scheduled', 500],
      ['later', 'scheduled', 1999],
    ]);
    expect(Date.parse(listed[0]!.dueAt)).toBeGreaterThan(Date.now() + 7_000_000);
    expect(ship.stdout).toMatch(/^ID\s+DUE\s+ATTEMPTS\s+ENQUEUED\ns3\s+.*\ns4\s+.*\n4-5 of 5 scheduled\n$/);

    const [show, showJson, showDead, missing, noType] = await Promise.all([
      cli('show', 'cli.payment', 'later'),
      cli('show', 'cli.payment', 'later', '--json'),
      cli('show', 'cli.payment', 'dead-1'),
      cli('show', 'cli.payment', 'nope'),
      cli('show', 'cli.nothing', 'later'),
    ]);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(
      /^id {10}later\ntype {8}cli\.payment\nstate {7}scheduled\ndue {9}\S+ \S+ \(in 2h 59m\)\nattempts {4}0\npriority {4}0\nenqueued .*\ncontext {5}\{"tenant":"acme"\}\nlast error {2}-\nwhy {9}not due until \S+ \(in \d+ s\)\nevent {7}\{\n {14}"cents": 1999,\n {14}"id": "later"\n {12}\}\n$/,
    );
    expect(JSON.parse(showJson.stdout)).toMatchObject({ type: 'cli.payment', id: 'later', state: 'scheduled', attempt: 0, context: { tenant: 'acme' }, event: { id: 'later', cents: 1999 } });
    expect(showDead.stdout).toMatch(/state {7}dead\n[\s\S]*dead since {2}.* ago\)\n[\s\S]*last error {2}permanent failure: card declined \(attempt 1 of 3\)\n/);
    expect(showDead.stdout).toMatch(/\nwhy {9}dead-lettered after attempt 1: permanent failure: card declined .*replayDeadLetters\(\) runs it again\n/);
    expect(JSON.parse(showJson.stdout).explanation).toMatchObject({ gate: 'not-due', state: 'scheduled', group: 'default' });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no event 'nope' of type 'cli\.payment'/);
    expect(noType.code).toBe(1);
  });

  it('reschedule, run-now, pause and resume', async () => {
    const moved = await cli('reschedule', 'cli.payment', 'sooner', '1h30m');
    expect(moved.code).toBe(0);
    expect(moved.stdout).toMatch(/^rescheduled 'sooner' of 'cli\.payment': due \S+ \S+ \(in 1h 29m\)\n$/);
    const at = '2099-12-01T09:00Z';
    const dated = await cli('reschedule', 'cli.payment', 'sooner', at, '--json');
    expect(JSON.parse(dated.stdout)).toEqual({ type: 'cli.payment', id: 'sooner', state: 'scheduled', dueAt: new Date(at).toISOString() });
    expect((await service.find(Payment, 'sooner'))?.dueAt.toISOString()).toBe(new Date(at).toISOString());
    expect((await cli('reschedule', 'cli.payment', 'running', '1h')).code).toBe(1);
    expect((await cli('run-now', 'cli.payment', 'nope')).code).toBe(1);

    const paused = await cli('pause', 'cli.payment');
    expect(paused.code).toBe(0);
    expect(paused.stdout).toMatch(/^paused 'cli\.payment': no instance dispatches or claims its events/);
    expect(await service.isPaused(Payment)).toBe(true);
    expect(JSON.parse((await cli('types', '--json')).stdout)[0]).toMatchObject({ type: 'cli.payment', paused: true });
    // Paused: made due now, it stays where it is.
    const now = await cli('run-now', 'cli.payment', 'sooner');
    expect(now.code).toBe(0);
    expect(now.stdout).toMatch(/^ran now 'sooner' of 'cli\.payment': due \S+ \S+ \(now\)\n$/);
    expect(JSON.parse((await cli('resume', 'cli.payment', '--json')).stdout)).toEqual({ type: 'cli.payment', paused: false });
    expect(await service.isPaused(Payment)).toBe(false);
    expect((await cli('pause', 'cli.nothing')).code).toBe(1);
  });

  it('cancel, dead, replay and purge: destructive ones ask, and refuse without a terminal', async () => {
    await service.enqueue(new Payment('to-cancel', 1), { hours: 5 });
    let before = await snapshot();
    const refused = await cli('cancel', 'cli.payment', 'to-cancel');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/Cancel event 'to-cancel' of 'cli\.payment' \(scheduled, due .*\)\? .*\nstdin is not a terminal, so nothing was asked: add --yes/);
    expect(await snapshot()).toEqual(before);
    expect(await cli('cancel', 'cli.payment', 'to-cancel', '--yes')).toMatchObject({ code: 0, stdout: "cancelled 'to-cancel' of 'cli.payment'\n" });
    expect((await cli('cancel', 'cli.payment', 'to-cancel', '--yes')).code).toBe(1);

    const dead = await cli('dead', 'cli.payment');
    expect(dead.stdout).toMatch(/^ID\s+DEAD SINCE\s+ATTEMPTS\s+ERROR\ndead-1\s.*\ndead-2\s.*\ndead-3\s.*permanent failure: card declined \(attempt 1 of 3\)\n1-3 of 3 dead\n$/);
    const deadJson = JSON.parse((await cli('dead', 'cli.payment', '--json', '--limit', '1')).stdout) as Array<{ id: string; error: string; event: { cents: number } }>;
    expect(deadJson.map((d) => [d.id, d.event.cents, d.error])).toEqual([['dead-1', 1, 'permanent failure: card declined (attempt 1 of 3)']]);

    before = await snapshot();
    const purgeRefused = await cli('purge', 'cli.payment');
    expect(purgeRefused.code).toBe(2);
    expect(purgeRefused.stderr).toMatch(/Delete all 3 dead letters of 'cli\.payment' for good\?\nstdin is not a terminal/);
    expect((await cli('replay', 'cli.payment')).code).toBe(2);
    expect(await snapshot()).toEqual(before);

    expect((await cli('replay', 'cli.payment', 'nope')).code).toBe(1);
    expect(await cli('replay', 'cli.payment', 'dead-1', '--json')).toMatchObject({ code: 0, stdout: `${JSON.stringify({ type: 'cli.payment', replayed: 1 }, null, 2)}\n` });
    // Due now; the one handler slot is taken, so it waits there.
    expect(['scheduled', 'ready']).toContain((await service.find(Payment, 'dead-1'))?.state);
    expect(await cli('purge', 'cli.payment', 'dead-2', '--yes')).toMatchObject({ code: 0, stdout: "purged 1 dead letter(s) of 'cli.payment'\n" });
    expect(await cli('purge', 'cli.payment', '--yes', '--json')).toMatchObject({ code: 0, stdout: `${JSON.stringify({ type: 'cli.payment', purged: 1 }, null, 2)}\n` });
    expect((await service.counts(Payment))?.dead).toBe(0);
  });

  it('schedules lists recurring schedules with their next occurrence; unschedule asks, then removes one', async () => {
    await service.schedule('weekday-check', new Payment('', 5), { cron: '0 9 * * 1-5', tz: 'Europe/Paris' }, { startAt: new Date('2099-01-05T00:00:00Z'), catchUp: 'none' });
    const listed = await cli('schedules', 'cli.payment');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/NAME\s+SPEC\s+NEXT\s+CATCH UP/);
    expect(listed.stdout).toMatch(/weekday-check\s+cron '0 9 \* \* 1-5' Europe\/Paris\s+2099-01-05 08:00:00.*\s+none/);
    expect(JSON.parse((await cli('schedules', 'cli.payment', '--json')).stdout)).toEqual([expect.objectContaining({ name: 'weekday-check', next: '2099-01-05T08:00:00.000Z', catchUp: 'none' })]);
    // Without a terminal and without --yes it refuses, and the schedule stays.
    expect((await cli('unschedule', 'cli.payment', 'weekday-check')).code).toBe(2);
    expect(await service.schedules(Payment)).toHaveLength(1);
    expect((await cli('unschedule', 'cli.payment', 'weekday-check', '--yes')).code).toBe(0);
    expect(await service.schedules(Payment)).toEqual([]);
    expect((await cli('unschedule', 'cli.payment', 'weekday-check', '--yes')).code).toBe(1);
  });

  it('bad input exits 2 with what to fix, and changes nothing', async () => {
    const before = await snapshot();
    const cases: Array<[string[], RegExp]> = [
      [['list', 'cli.payment', '--state', 'done'], /--state must be one of scheduled, ready, in-flight, dead/],
      [['list', 'cli.payment', '--limit', '5000'], /--limit must be a whole number from 1 to 1000/],
      [['list', 'cli.payment', '--offset', '-1'], /--offset must be a whole number/],
      [['reschedule', 'cli.payment', 'later', 'soon'], /cannot read "soon" as a delay or a date: use a duration such as 90s/],
      [['reschedule', 'cli.payment', 'later', '2026-13-45T99:00Z'], /cannot read/],
      [['reschedule', 'cli.payment', 'later', '200000d'], /Invalid delay/],
      [['show', '', 'x'], /Invalid type/],
      [['show', 'cli.payment'], /missing required argument 'id'/],
      [['frobnicate'], /unknown command 'frobnicate'/],
      [['list', 'cli.payment', '--lmit', '5'], /unknown option '--lmit'[\s\S]*Did you mean --limit\?/],
      [['types', '--prefix', 'no spaces'], /--prefix: Invalid option prefix: must be/],
      [['list', 'cli.payment', '--group', 'no such'], /Invalid group/],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(...args)));
    results.forEach((result, i) => {
      expect(result.code, cases[i]![0].join(' ')).toBe(2);
      expect(result.stderr, cases[i]![0].join(' ')).toMatch(cases[i]![1]);
    });
    expect(JSON.parse((await cli('list', 'cli.payment', '--state', 'done', '--json')).stdout)).toMatchObject({ exitCode: 2, error: expect.stringMatching(/--state/) });
    expect(await snapshot()).toEqual(before);
  });

  it('says how to connect, and gives up on an unreachable Redis within seconds', async () => {
    const none = await run(['types']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no Redis to connect to: pass --redis redis:\/\/host:port \(or set REDIS_URL\)/);
    const started = Date.now();
    const unreachable = await run(['types'], { REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
    expect(unreachable.code).toBe(2);
    expect(unreachable.stderr).toMatch(/cannot connect to redis:\/\/127\.0\.0\.1:\d+: .*check --redis or REDIS_URL/);
    expect(Date.now() - started).toBeLessThan(10_000);
    const viaEnv = await run(['--prefix', prefix, 'types', '--json'], { REDIS_URL: redis.server.url });
    expect(viaEnv.code).toBe(0);
    expect(JSON.parse(viaEnv.stdout)).toHaveLength(2);
    expect((await run(['--help'])).code).toBe(0);
  });

  it('escapes control characters of stored text on a terminal, and keeps JSON exact', async () => {
    const hostilePrefix = 'cli-hostile';
    const owner = new DelayedEventService({ redis: redis.server.url, prefix: hostilePrefix, logger: false });
    try {
      const id = 'evil\u001b]0;pwned\u0007\u001b[2J\u202eid\r\nfake line';
      await owner.enqueue(new Payment(id, 1), { minutes: 5 });
      const at = (args: string[]) => run(['--redis', redis.server.url, '--prefix', hostilePrefix, ...args]);
      for (const args of [
        ['list', 'cli.payment'],
        ['show', 'cli.payment', id],
        ['cancel', 'cli.payment', id],
      ]) {
        const result = await at(args);
        const printed = result.stdout + result.stderr;
        expect(printed, args[0]).not.toMatch(/[\u001b\u0007\u202e\r]/);
        expect(printed, args[0]).toContain('\\u001b');
        expect(printed, args[0]).not.toMatch(/\nfake line/);
      }
      const listed = JSON.parse((await at(['list', 'cli.payment', '--json'])).stdout) as Array<{ id: string }>;
      expect(listed.map((e) => e.id)).toEqual([id]);
    } finally {
      await owner.close();
    }
  });

  it('refuses a URL without a host and a database Redis does not have, naming them', async () => {
    const noHost = await run(['--redis', 'redis://', 'types']);
    expect(noHost.code).toBe(2);
    expect(noHost.stderr).toMatch(/names no host/);
    const noDatabase = await run(['--redis', `${redis.server.url}/99`, 'types']);
    expect(noDatabase.code).toBe(2);
    expect(noDatabase.stderr).toMatch(/database 99 does not exist/);
  });

  it('gives up on a Redis that never answers, connecting, with exit code 1', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    try {
      // Connections are taken and black-holed: the handshake never gets an answer, as from a frozen Redis.
      proxy.blackholeNewConnections();
      const started = Date.now();
      const result = await run(['--redis', proxy.url, '--prefix', prefix, '--timeout', '1000', 'types']);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/cannot connect to .*: .*no answer within 1 s/);
      expect(Date.now() - started).toBeLessThan(8_000);
    } finally {
      await proxy.stop();
    }
  });

  it('gives up after --timeout when Redis stops answering after connecting, with exit code 1', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    try {
      proxy.silenceConnectionsAfter('SCAN');
      for (const command of ['types', 'stats']) {
        const started = Date.now();
        const result = await run(['--redis', proxy.url, '--prefix', prefix, '--timeout', '1000', command]);
        expect(result.code, command).toBe(1);
        expect(result.stderr, command).toMatch(/did not answer/);
        expect(Date.now() - started, command).toBeLessThan(8_000);
      }
    } finally {
      await proxy.stop();
    }
  });

  it('watch redraws counts and rates every second, and exits 0 on SIGINT', async () => {
    const child = spawn(process.execPath, [CLI, '--redis', redis.server.url, '--prefix', prefix, 'watch', '--interval', '200'], {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const closed = new Promise<number | null>((resolve) => child.once('close', resolve));
    await waitFor(() => (stdout.match(/Ctrl-C to stop/g) ?? []).length >= 2, 'two frames');
    expect(stdout).toMatch(/delayed-events watch: prefix 'cli', .*; Ctrl-C to stop\n\nTYPE\s+SCHEDULED\s+READY\s+IN FLIGHT\s+DEAD\s+PAUSED\ncli\.payment\s+\S+.*\ncli\.ship\s+5\s+0\s+0\s+0\s+no\n/);
    await service.enqueue(new Ship('s-new'), { minutes: 30 });
    await waitFor(() => /cli\.ship\s+6 \(\+[\d.]+\/s\)/.test(stdout), 'a frame with the new event and its rate');
    child.kill('SIGINT');
    expect(await closed).toBe(0);
  });

  it('watch clears a terminal before each frame, while the stored text in it stays escaped', async () => {
    // A pseudo-terminal (util-linux script): stdout is a TTY, so watch redraws.
    const command = [process.execPath, CLI, '--redis', redis.server.url, '--prefix', prefix, 'watch', '--interval', '200'].map((a) => `'${a}'`).join(' ');
    const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
    try {
      await waitFor(() => (stdout.match(/Ctrl-C to stop/g) ?? []).length >= 2, 'two frames');
      expect(stdout.split('\u001b[H\u001b[2J').length).toBeGreaterThanOrEqual(3);
      expect(stdout).not.toContain('\\u001b');
    } finally {
      child.kill('SIGKILL');
      await closed;
    }
  });

  it('dashboard serves the web dashboard on loopback until SIGTERM; a short token exits 2', async () => {
    const token = 'cli-dashboard-token-0123';
    const child = spawn(process.execPath, [CLI, '--redis', redis.server.url, '--prefix', prefix, 'dashboard', '--port', '0', '--token', token], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const closed = new Promise<number | null>((resolve) => child.once('close', resolve));
    const url = (await waitFor(() => /on (http:\/\/127\.0\.0\.1:\d+\/);/.exec(stdout)?.[1], 'the dashboard address'))!;
    expect(stdout).toContain("dashboard for prefix 'cli'");
    expect((await fetch(`${url}api/overview`)).status).toBe(401);
    const overview = (await (await fetch(`${url}api/overview`, { headers: { authorization: `Bearer ${token}` } })).json()) as { types: Array<{ type: string }> };
    expect(overview.types.map((t) => t.type)).toEqual(['cli.payment', 'cli.ship']);
    child.kill('SIGTERM');
    expect(await closed).toBe(0);

    // Without auth it answers to loopback names and the --allow-host ones only: a rebound name is refused.
    const open = spawn(process.execPath, [CLI, '--redis', redis.server.url, '--prefix', prefix, 'dashboard', '--port', '0', '--allow-host', 'ops.internal'], {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let openOut = '';
    open.stdout.on('data', (chunk: Buffer) => (openOut += chunk.toString()));
    const openClosed = new Promise<number | null>((resolve) => open.once('close', resolve));
    const openUrl = new URL((await waitFor(() => /on (http:\/\/127\.0\.0\.1:\d+\/);/.exec(openOut)?.[1], 'the open dashboard address'))!);
    const statusFor = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port: openUrl.port, path: '/api/overview', headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    expect(await statusFor(`127.0.0.1:${openUrl.port}`)).toBe(200);
    expect(await statusFor(`ops.internal:${openUrl.port}`)).toBe(200);
    expect(await statusFor(`attacker.example:${openUrl.port}`)).toBe(403);
    open.kill('SIGTERM');
    expect(await openClosed).toBe(0);

    const short = await cli('dashboard', '--port', '0', '--token', 'short');
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(/--token must be at least 16 characters/);
  });

  it('prints its version, lists every schedule and the live instances, and says nothing was done when nothing was', async () => {
    const version = await run(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toBe((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);

    await service.schedule('nightly-ship', new Ship(''), { cron: '0 3 * * *', tz: 'UTC' });
    const all = await cli('schedules');
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/^TYPE\s+NAME\s+SPEC\s+NEXT\s+CATCH UP\s+LAST\s+POLICY\s+SKIPPED\s+REMAINING\n/);
    expect(all.stdout).toContain('cli.ship');
    const listed = JSON.parse((await cli('schedules', '--json')).stdout) as Array<{ type: string; name: string }>;
    expect(listed.map((s) => `${s.type}/${s.name}`)).toContain('cli.ship/nightly-ship');
    // One schedule paused and resumed (since 0.6): its type is not.
    const paused = await cli('pause-schedule', 'cli.ship', 'nightly-ship');
    expect(paused.code).toBe(0);
    expect(paused.stdout).toMatch(/paused the recurring schedule 'nightly-ship'/);
    expect((await cli('schedules')).stdout).toMatch(/nightly-ship.*paused \(paused\)/);
    expect((await service.schedules(Ship))[0]!.paused).toBe(true);
    expect((await cli('resume-schedule', 'cli.ship', 'nightly-ship')).code).toBe(0);
    expect((await service.schedules(Ship))[0]!.paused).toBe(false);
    const missing = await cli('pause-schedule', 'cli.ship', 'no-such');
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/no recurring schedule 'no-such'/);
    expect(await service.unschedule(Ship, 'nightly-ship')).toBe(true);

    // This file's service handles cli.payment: it answers.
    const instances = JSON.parse((await cli('instances', '--json')).stdout) as Array<{ pid: number; handlers: Array<{ type: string }> }>;
    expect(instances.some((i) => i.pid === process.pid && i.handlers.some((h) => h.type === 'cli.payment'))).toBe(true);
    expect((await cli('instances')).stdout).toMatch(/^INSTANCE\s+HOST\s+PID\s+STARTED\s+HANDLERS/);

    // Stored versions, by type name: a body of version 2 has its number in front.
    await service.enqueue(new Ship('versioned-1'), 3_600_000);
    const client = redis.client();
    const key = `${prefix}:{cli.ship#${partitionOf('versioned-1', 3)}}:m`;
    const stored = (await client.hget(key, 'versioned-1'))!;
    await client.hset(key, 'versioned-1', stored.replace(/^(\d+\|\d+\|)/, '$12|'));
    const versions = await cli('versions', 'cli.ship');
    expect(versions.code).toBe(0);
    expect(versions.stdout).toMatch(/^STORED\s+VERSION\s+COUNT\n/);
    expect(versions.stdout).toMatch(/events\s+2\s+1\n/);
    const byVersion = JSON.parse((await cli('versions', 'cli.ship', '--json')).stdout) as { byVersion: Record<string, number> };
    expect(byVersion.byVersion['2']).toBe(1);
    expect((await cli('versions', 'cli.nothing-here')).code).not.toBe(0);

    // cli.ship has no dead letters: replaying them does nothing, and says so with exit 1.
    const nothing = await cli('replay', 'cli.ship', '--yes');
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toContain('nothing was replayed');
  });

  it('stats lists a type with a recurring schedule but nothing stored, with zeros, and exits 0 (since 0.6)', async () => {
    const own = 'cli-sched';
    const scheduler = new DelayedEventService({ redis: redis.server.url, prefix: own });
    try {
      await scheduler.schedule('nightly', new Ship(''), { cron: '0 3 * * *', tz: 'UTC' }, { startAt: new Date('2099-01-01T00:00:00Z') });
      const [stats, types, one] = await Promise.all([
        run(['--redis', redis.server.url, '--prefix', own, 'stats']),
        run(['--redis', redis.server.url, '--prefix', own, 'types']),
        run(['--redis', redis.server.url, '--prefix', own, 'stats', 'cli.ship', '--json']),
      ]);
      expect(one.code).toBe(0);
      expect(JSON.parse(one.stdout)).toEqual({ type: 'cli.ship', paused: false, scheduled: 0, ready: 0, inFlight: 0, dead: 0, waiting: 0 });
      expect(stats.stderr).toBe('');
      expect(stats.code).toBe(0);
      expect(stats.stdout).toMatch(/^TYPE\s+GROUP\s+SCHEDULED\s+READY\s+IN FLIGHT\s+DEAD\s+WAITING\s+PAUSED\ncli\.ship\s+-\s+0\s+0\s+0\s+0\s+0\s+no\n$/);
      expect(types.stdout).toMatch(/\ncli\.ship\s+3\s+-\s+no\s+1\n$/);
    } finally {
      await scheduler.close();
    }
  });

  it('drain, clean and obliterate ask first (refused without a terminal), then do what they say (since 0.6)', async () => {
    const own = 'cli-clean';
    const on = (...args: string[]) => run(['--redis', redis.server.url, '--prefix', own, ...args]);
    const producer = new DelayedEventService({ redis: redis.server.url, prefix: own, retry: fixedBackoff(1, 10), logger: false });
    try {
      await producer.enqueueMany(Array.from({ length: 7 }, (_, i) => ({ event: new Ship(`w${i}`), delay: 3_600_000 })));
      const before = await redis.snapshot(own);
      const asked = await on('drain', 'cli.ship');
      expect(asked.code).toBe(2);
      expect(asked.stderr).toMatch(/Remove every waiting event of 'cli\.ship' \(7 scheduled.*add --yes/s);
      expect(await redis.snapshot(own)).toEqual(before);
      const drained = await on('drain', 'cli.ship', '--yes', '--json');
      expect(JSON.parse(drained.stdout)).toEqual({ type: 'cli.ship', drained: 7 });

      // Dead letters to clean.
      producer.addHandler(Ship, () => {
        throw new PermanentFailure('no');
      });
      await producer.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ event: new Ship(`d${i}`) })));
      await waitFor(async () => (await producer.counts(Ship))?.dead === 4, 'four dead letters');
      expect((await on('clean', 'cli.ship', '--yes')).stderr).toMatch(/--older-than is required/);
      expect((await on('clean', 'cli.ship', '--older-than', '1h', '--yes')).stdout).toMatch(/deleted 0 dead letters/);
      expect((await on('clean', 'cli.ship', '--older-than', '0', '--limit', '3', '--yes')).stdout).toMatch(/deleted 3 dead letters of 'cli\.ship'/);
      expect((await producer.counts(Ship))?.dead).toBe(1);

      // Handled here: refused (exit 1) with what to do, then forced.
      const refused = await on('obliterate', 'cli.ship', '--yes');
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/handled by 1 running instance.*force/);
      const forced = await on('obliterate', 'cli.ship', '--force', '--yes');
      expect(forced.code).toBe(0);
      expect(forced.stdout).toMatch(/obliterated 'cli\.ship'/);
      expect(await redis.keys(`${own}:{cli.ship*}:[mdbr]`)).toEqual([]);
      expect((await on('obliterate', 'cli.nothing', '--yes')).code).toBe(1);
    } finally {
      await producer.close();
    }
  });
});
