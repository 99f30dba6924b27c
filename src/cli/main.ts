import { createInterface } from 'node:readline/promises';
import { Command, CommanderError } from 'commander';
import type { Cluster, Redis } from 'ioredis';
import { DelayedEventError, type Inspector, RedisCallTimeoutError, RedisConnectionError, TypeInUseError, createInspector } from '../index';
import * as commands from './commands';
import * as cleanup from './cleanup-commands';
import * as scheduleCommands from './schedule-commands';
import { CONNECT_TIMEOUT_MS, type ConnectionOptions, connect } from './connect';
import { printable } from './format';
import { EXIT, NotFoundError, UnansweredError, UsageError, parseWhole } from './parse';
import { watch } from './watch';
import { authFrom, serveDashboard } from './dashboard';
import { PACKAGE_VERSION } from './version';

/**
 * delayed-events: see and steer what reactive-delayed-events has stored in
 * Redis (docs/cli.md). It works on type names, never constructs handlers, and
 * exits 0 when done, 1 when the type or event is not there, 2 on bad input or
 * when Redis cannot be reached.
 */

interface GlobalOptions extends ConnectionOptions {
  readonly prefix: string;
  readonly json?: boolean;
  readonly timeout: string;
}

/** Asks on a terminal; refuses without one (a script must say --yes). */
async function confirm(question: string, yes: boolean): Promise<void> {
  if (yes) return;
  if (!process.stdin.isTTY) throw new UsageError(`${question}\nstdin is not a terminal, so nothing was asked: add --yes to do it; nothing was changed`);
  const prompt = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = (await prompt.question(`${question} [y/N] `)).trim().toLowerCase();
    if (answer !== 'y' && answer !== 'yes') throw new UsageError('not confirmed; nothing was changed');
  } finally {
    prompt.close();
  }
}

/** Connects, runs `job` with a service on the prefix, and always lets the connection go. */
async function withService(options: GlobalOptions, job: (ctx: commands.Context) => Promise<void>, persistent = false): Promise<void> {
  const timeoutMs = parseWhole('--timeout', options.timeout, 10_000, 100, 3_600_000);
  const client: Redis | Cluster = await connect(options, process.env, Math.min(timeoutMs, CONNECT_TIMEOUT_MS), persistent);
  let service: Inspector | undefined;
  try {
    try {
      service = createInspector({ redis: client, prefix: options.prefix, commandTimeoutMs: timeoutMs });
    } catch (error) {
      throw new UsageError(`--prefix: ${(error as Error).message}`);
    }
    const json = options.json === true;
    // Stored text reaches a terminal: escaped there (JSON escapes it itself, and stays exact).
    const out = (text: string) => void process.stdout.write(`${json ? text : printable(text)}\n`);
    await job({ service, prefix: options.prefix, json, out, confirm: (question, yes) => confirm(printable(question), yes), timeoutMs });
  } finally {
    await service?.close();
    client.disconnect();
  }
}

function program(run: (job: (ctx: commands.Context) => Promise<void>, command: Command, connection?: { persistent: boolean }) => Promise<void>): Command {
  const cli = new Command('delayed-events')
    .description('See and steer the delayed events reactive-delayed-events keeps in Redis.')
    .option('--redis <url>', 'Redis URL, redis://[user:password@]host:port[/db] or rediss:// (default: $REDIS_URL)')
    .option('--cluster', "the URL's host:port is a startup node of a Redis Cluster")
    .option('--nodes <host:port,...>', 'startup nodes of a Redis Cluster (implies --cluster)')
    .option('--prefix <prefix>', 'key prefix of the services (their `prefix` option)', 'dq')
    .option('--json', 'print JSON instead of tables')
    .option('--timeout <ms>', 'give up on Redis after this long (exit 1)', '10000')
    .version(PACKAGE_VERSION, '-V, --version', 'print the version of reactive-delayed-events')
    .showHelpAfterError('(add --help for usage)')
    .exitOverride();

  cli
    .command('types')
    .description('event types stored under the prefix, with their partitions and groups')
    .action((_, cmd: Command) => run((ctx) => commands.types(ctx), cmd));
  cli
    .command('stats [type]')
    .description('events per state for each type (or one type), and per group')
    .action((type: string | undefined, _, cmd: Command) => run((ctx) => commands.stats(ctx, type), cmd));
  cli
    .command('list <type>')
    .description('one page of the events in a state')
    .option('--state <state>', 'scheduled, ready, in-flight, dead, handled (kept with keepHandled) or waiting (a flow parent, since 0.6)', 'scheduled')
    .option('--group <group>', 'subscriber group (default: the default group)')
    .option('--limit <n>', 'page size, 1 to 1000', '20')
    .option('--offset <n>', 'events to skip', '0')
    .action((type: string, options: commands.PageOptions & { state: string }, cmd: Command) => run((ctx) => commands.list(ctx, type, options), cmd));
  cli
    .command('show <type> <id>')
    .description('one event: its state, due time, attempts, context, last error and payload')
    .action((type: string, id: string, _, cmd: Command) => run((ctx) => commands.show(ctx, type, id), cmd));
  cli
    .command('cancel <type> <id>')
    .description('delete one event, in whatever state')
    .option('-y, --yes', 'do not ask')
    .action((type: string, id: string, options: { yes?: boolean }, cmd: Command) => run((ctx) => commands.cancel(ctx, type, id, options.yes === true), cmd));
  cli
    .command('reschedule <type> <id> <delay>')
    .description('move a scheduled or ready event: a delay from now (90s, 3h, 1h30m, 500ms) or an ISO date (2026-12-01T09:00Z)')
    .action((type: string, id: string, delay: string, _, cmd: Command) => run((ctx) => commands.reschedule(ctx, type, id, delay), cmd));
  cli
    .command('run-now <type> <id>')
    .description('make a scheduled or ready event due at once')
    .action((type: string, id: string, _, cmd: Command) => run((ctx) => commands.runNow(ctx, type, id), cmd));
  cli
    .command('pause <type>')
    .description('stop every instance dispatching and claiming the type (enqueues still store), until resume')
    .action((type: string, _, cmd: Command) => run((ctx) => commands.pause(ctx, type, true), cmd));
  cli
    .command('resume <type>')
    .description('undo pause')
    .action((type: string, _, cmd: Command) => run((ctx) => commands.pause(ctx, type, false), cmd));
  cli
    .command('dead <type>')
    .description('dead letters, oldest first, with their last error')
    .option('--group <group>', 'subscriber group (default: every group that has dead letters)')
    .option('--limit <n>', 'page size, 1 to 1000', '20')
    .option('--offset <n>', 'dead letters to skip', '0')
    .action((type: string, options: commands.PageOptions, cmd: Command) => run((ctx) => commands.dead(ctx, type, options), cmd));
  cli
    .command('replay <type> [ids...]')
    .description('dead letters back to scheduled, due now, attempts reset (no ids: all, after asking)')
    .option('--group <group>', 'subscriber group (default: every group that has dead letters)')
    .option('-y, --yes', 'do not ask')
    .action((type: string, ids: string[], options: { group?: string; yes?: boolean }, cmd: Command) =>
      run((ctx) => commands.replay(ctx, type, ids, { ...(options.group ? { group: options.group } : {}), yes: options.yes === true }), cmd),
    );
  cli
    .command('purge <type> [ids...]')
    .description('delete dead letters for good (no ids: all); asks first unless --yes')
    .option('--group <group>', 'subscriber group (default: every group that has dead letters)')
    .option('-y, --yes', 'do not ask')
    .action((type: string, ids: string[], options: { group?: string; yes?: boolean }, cmd: Command) =>
      run((ctx) => commands.purge(ctx, type, ids, { ...(options.group ? { group: options.group } : {}), yes: options.yes === true }), cmd),
    );
  cli
    .command('drain <type>')
    .description("remove waiting events: the schedule and every group's READY ones, or with --group that group's READY ones and retries; asks first unless --yes")
    .option('--group <group>', 'only this subscriber group')
    .option('-y, --yes', 'do not ask')
    .action((type: string, options: { group?: string; yes?: boolean }, cmd: Command) =>
      run((ctx) => cleanup.drain(ctx, type, { ...(options.group ? { group: options.group } : {}), yes: options.yes === true }), cmd),
    );
  cli
    .command('clean <type>')
    .description('delete dead letters (or history records) older than --older-than; asks first unless --yes')
    .option('--state <state>', 'dead or handled', 'dead')
    .option('--older-than <duration>', 'only those older than this, such as 7d or 12h (0: all); required')
    .option('--limit <n>', 'at most this many, oldest first')
    .option('--group <group>', 'subscriber group (default: the default group)')
    .option('-y, --yes', 'do not ask')
    .action((type: string, options: { state?: string; olderThan?: string; limit?: string; group?: string; yes?: boolean }, cmd: Command) =>
      run((ctx) => cleanup.clean(ctx, type, { ...options, yes: options.yes === true }), cmd),
    );
  cli
    .command('obliterate <type>')
    .description('remove every key of a type, for good; refused while an instance handles it unless --force; asks first unless --yes')
    .option('--force', 'even while instances handle it')
    .option('-y, --yes', 'do not ask')
    .action((type: string, options: { force?: boolean; yes?: boolean }, cmd: Command) =>
      run((ctx) => cleanup.obliterate(ctx, type, { force: options.force === true, yes: options.yes === true }), cmd),
    );
  cli
    .command('schedules [type]')
    .description('recurring schedules of a type (without one: of every type), with their spec, next and last occurrence')
    .action((type: string | undefined, _, cmd: Command) => run((ctx) => commands.schedules(ctx, type), cmd));
  cli
    .command('limits <type>')
    .description("a type's flow limits per group (rateLimit, globalConcurrency) and their use now: calls in the window, running, a handler's hold")
    .action((type: string, _, cmd: Command) => run((ctx) => commands.limits(ctx, type), cmd));
  cli
    .command('versions <type>')
    .description("how many of a type's stored events and schedule templates each event class version wrote (reads every event: takes a while for millions)")
    .action((type: string, _, cmd: Command) => run((ctx) => commands.versions(ctx, type), cmd));
  cli
    .command('instances')
    .description('live instances handling events under the prefix, as they answer now: host, pid, start, and each handler with its calls running')
    .action((_, cmd: Command) => run((ctx) => commands.instances(ctx), cmd));
  cli
    .command('unschedule <type> <name>')
    .description('remove a recurring schedule (asks first unless --yes)')
    .option('-y, --yes', 'do not ask')
    .action((type: string, name: string, options: { yes?: boolean }, cmd: Command) => run((ctx) => commands.unschedule(ctx, type, name, options.yes === true), cmd));
  cli
    .command('pause-schedule <type> <name>')
    .description('pause one recurring schedule in every instance (its type is not paused), until resume-schedule')
    .action((type: string, name: string, _, cmd: Command) => run((ctx) => scheduleCommands.pauseSchedule(ctx, type, name), cmd));
  cli
    .command('resume-schedule <type> <name>')
    .description('resume a paused recurring schedule from now on (what fell while it was paused does not run)')
    .action((type: string, name: string, _, cmd: Command) => run((ctx) => scheduleCommands.resumeSchedule(ctx, type, name), cmd));
  cli
    .command('watch [types...]')
    .description('live counts and rates per type, redrawn every second until Ctrl-C')
    .option('--interval <ms>', 'redraw every this many ms', '1000')
    .action((types: string[], options: { interval: string }, cmd: Command) => {
      const intervalMs = parseWhole('--interval', options.interval, 1_000, 100, 3_600_000);
      const stopped = new Promise<void>((resolve) => {
        process.once('SIGINT', () => resolve());
        process.once('SIGTERM', () => resolve());
      });
      return run((ctx) => watch(ctx, { intervalMs, types, redraw: process.stdout.isTTY === true && !ctx.json, writeRaw: (bytes) => void process.stdout.write(bytes), stopped }), cmd);
    });
  cli
    .command('dashboard')
    .description('serve the web dashboard (http://127.0.0.1:8787/ by default) until Ctrl-C')
    .option('--port <port>', 'port to listen on (0: any free one)', '8787')
    .option('--host <host>', 'address to listen on; anything but loopback needs --token or --basic-auth to be safe', '127.0.0.1')
    .option('--read-only', 'hide and refuse every action')
    .option('--token <token>', 'require this token (at least 16 characters; default: $DELAYED_EVENTS_DASHBOARD_TOKEN)')
    .option('--basic-auth <user:password>', 'require this user and password (default: $DELAYED_EVENTS_DASHBOARD_BASIC_AUTH)')
    .option('--allow-host <name...>', 'also answer to this host name (a reverse proxy in front, say); without auth only loopback names and the listen address are served')
    .action((options: { port: string; host: string; readOnly?: boolean; token?: string; basicAuth?: string; allowHost?: string[] }, cmd: Command) => {
      const port = parseWhole('--port', options.port, 8787, 0, 65_535);
      const auth = authFrom(options.token ?? process.env.DELAYED_EVENTS_DASHBOARD_TOKEN, options.basicAuth ?? process.env.DELAYED_EVENTS_DASHBOARD_BASIC_AUTH);
      const stopped = new Promise<void>((resolve) => {
        process.once('SIGINT', () => resolve());
        process.once('SIGTERM', () => resolve());
      });
      return run(
        (ctx) =>
          serveDashboard(ctx.service, {
            port,
            host: options.host,
            readOnly: options.readOnly === true,
            auth,
            allowHosts: options.allowHost ?? [],
            stopped,
            out: ctx.out,
            warn: (text) => void process.stderr.write(`delayed-events: ${text}\n`),
          }),
        cmd,
        { persistent: true },
      );
    });
  return cli;
}

/** Runs the CLI on `argv` (as process.argv); resolves the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  let json = argv.includes('--json');
  const cli = program(async (job, command, connection) => {
    const options = command.optsWithGlobals<GlobalOptions>();
    json = options.json === true;
    await withService(options, job, connection?.persistent === true);
  });
  try {
    await cli.parseAsync(argv);
    return EXIT.done;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and --version are no error; commander has printed its message already.
      return error.exitCode === 0 ? EXIT.done : EXIT.usage;
    }
    // Redis out of reach or silent: exit 1, as for something not found (2 is for a wrong command line).
    const unavailable = error instanceof RedisCallTimeoutError || error instanceof RedisConnectionError || error instanceof UnansweredError;
    // Refused because instances handle the type (obliterate): not done, as for something not found.
    const code = error instanceof NotFoundError || error instanceof TypeInUseError || unavailable ? EXIT.notFound : EXIT.usage;
    const known = error instanceof UsageError || error instanceof NotFoundError || error instanceof UnansweredError || error instanceof DelayedEventError || error instanceof TypeError;
    const message = known ? (error as Error).message : `Redis answered: ${(error as Error).message}`;
    process.stderr.write(`delayed-events: ${printable(message)}\n`);
    if (json) process.stdout.write(`${JSON.stringify({ error: message, exitCode: code })}\n`);
    return code;
  }
}

void main(process.argv).then((code) => {
  process.exitCode = code;
  // Everything is closed by now; a handle left open must not keep a finished command waiting.
  setTimeout(() => process.exit(code), 1_000).unref();
});
