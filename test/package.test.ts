import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from './support/redis-server';

const run = promisify(execFile);
const ROOT = join(__dirname, '..');

/**
 * What a user's plain CommonJS program does with the installed package: no
 * tsx, no decorator syntax. Its handler is async and it watches the metrics,
 * as a real service would; the timeouts are ten minutes, so a timer of theirs
 * left armed after close() would hold the process far longer than the test waits.
 */
const CONSUMER = `
const { DelayedEvent, DelayedEventService } = require(process.argv[2]);
class Ping { constructor(id = '', note = '') { this.id = id; this.note = note; } }
DelayedEvent('package.ping')(Ping);
(async () => {
  const tenMinutes = 600000;
  const service = new DelayedEventService({ redis: process.argv[3], prefix: 'pkg', closeTimeoutMs: tenMinutes, handlerTimeoutMs: tenMinutes });
  service.metrics$.subscribe();
  const handled = new Promise((resolve) => service.addHandler(Ping, async (event) => (resolve(event), true), 1));
  const status = await service.enqueue(new Ping('p-1', 'from the tarball'), 50);
  const event = await handled;
  await service.close();
  console.log(JSON.stringify({ status, id: event.id, note: event.note, isPing: event instanceof Ping }));
})().catch((error) => { console.error(error); process.exit(1); });
`;

/** Runs the consumer to its end; rejects when the process fails or has not exited on its own within 20 s. */
const runConsumer = (dir: string, url: string) => run(process.execPath, [join(dir, 'consumer.js'), join(dir, 'package'), url], { timeout: 20_000 });

describe('the published package', () => {
  let dir: string;
  let server: RedisServer;
  let packed: string[];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rde-package-'));
    server = await RedisServer.start();
    // npm pack runs prepack (the build) and packs what `files` names, as publishing would.
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT });
    const [report] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    packed = report!.files.map((f) => f.path);
    await run('tar', ['xzf', join(dir, report!.filename), '-C', dir]);
    // The package's dependencies, as npm would have installed them beside it.
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'package', 'node_modules'), 'dir');
    writeFileSync(join(dir, 'consumer.js'), CONSUMER);
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('holds every Lua script the service loads, and the built code with its types', () => {
    const scripts = (sub: string) => readdirSync(join(ROOT, sub)).filter((f) => f.endsWith('.lua')).map((f) => `${sub}/${f}`);
    expect(packed).toEqual(expect.arrayContaining([...scripts('lua'), ...scripts('lua/includes'), 'dist/src/index.js', 'dist/src/index.d.ts']));
    expect(packed.filter((path) => path.startsWith('test/') || path.startsWith('dist/test/') || path.endsWith('.ts') && !path.endsWith('.d.ts'))).toEqual([]);
  });

  it('schedules and handles an event when required from plain JavaScript', async () => {
    const { stdout } = await runConsumer(dir, server.url);
    expect(JSON.parse(stdout)).toEqual({ status: 'scheduled', id: 'p-1', note: 'from the tarball', isPing: true });
  });

  it('lets the program exit once close() resolved, though its handler and close timeouts are far off', async () => {
    const started = performance.now();
    const outcome = await runConsumer(dir, server.url).then(
      () => 'exited',
      (error: { killed?: boolean }) => (error.killed ? `still running after ${Math.round(performance.now() - started)} ms: killed` : `failed: ${String(error)}`),
    );
    expect(outcome).toBe('exited');
  });
});
