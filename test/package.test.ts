import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from './support/redis-server';

const run = promisify(execFile);
const ROOT = join(__dirname, '..');

/**
 * What a user's plain CommonJS program does with the installed package: no
 * tsx, no decorator syntax, its own class-transformer for a nested Date. Its
 * handler is async and it watches the metrics, as a real service would; the
 * timeouts are ten minutes, so a timer of theirs left armed after close()
 * would hold the process far longer than the test waits.
 */
const APP = `
const { Type } = require('class-transformer');
const { DelayedEvent, DelayedEventService } = require('reactive-delayed-events');
class Ping { constructor(id = '', at = new Date(0)) { this.id = id; this.at = at; } }
Type(() => Date)(Ping.prototype, 'at');
DelayedEvent('package.ping')(Ping);
(async () => {
  const tenMinutes = 600000;
  const service = new DelayedEventService({ redis: process.argv[2], prefix: 'pkg', closeTimeoutMs: tenMinutes, handlerTimeoutMs: tenMinutes });
  service.metrics$.subscribe();
  const handled = new Promise((resolve) => service.addHandler(Ping, async (event) => (resolve(event), true), 1));
  const status = await service.enqueue(new Ping('p-1', new Date('2026-01-02T03:04:05Z')), 50);
  const event = await handled;
  await service.close();
  console.log(JSON.stringify({ status, id: event.id, isPing: event instanceof Ping, at: event.at instanceof Date ? event.at.toISOString() : typeof event.at }));
})().catch((error) => { console.error(error); process.exit(1); });
`;

describe('the published package', () => {
  let dir: string;
  let server: RedisServer;
  let packed: string[];
  let manifest: { dependencies?: Record<string, string>; peerDependencies?: Record<string, string> };

  /** Runs the app to its end; rejects when it fails or has not exited on its own within 20 s. */
  const runApp = () => run(process.execPath, [join(dir, 'app', 'app.js'), server.url], { timeout: 20_000 });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rde-package-'));
    server = await RedisServer.start();
    // npm pack runs prepack (the build) and packs what `files` names, as publishing would.
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT });
    const [report] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    packed = report!.files.map((f) => f.path);
    await run('tar', ['xzf', join(dir, report!.filename), '-C', dir]);
    manifest = JSON.parse(readFileSync(join(dir, 'package', 'package.json'), 'utf8')) as typeof manifest;
    // An app laid out as npm installs one: the package and, beside it, its
    // dependencies and the app's own (one class-transformer, the peer).
    const modules = join(dir, 'app', 'node_modules');
    mkdirSync(modules, { recursive: true });
    renameSync(join(dir, 'package'), join(modules, 'reactive-delayed-events'));
    for (const name of readdirSync(join(ROOT, 'node_modules'))) {
      if (!name.startsWith('.')) symlinkSync(join(ROOT, 'node_modules', name), join(modules, name), 'dir');
    }
    writeFileSync(join(dir, 'app', 'app.js'), APP);
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('holds every Lua script the service loads, and the built code with its types', () => {
    const scripts = (sub: string) => readdirSync(join(ROOT, sub)).filter((f) => f.endsWith('.lua')).map((f) => `${sub}/${f}`);
    expect(packed).toEqual(expect.arrayContaining([...scripts('lua'), ...scripts('lua/includes'), 'dist/src/index.js', 'dist/src/index.d.ts']));
    expect(packed.filter((path) => path.startsWith('test/') || path.startsWith('dist/test/') || (path.endsWith('.ts') && !path.endsWith('.d.ts')))).toEqual([]);
  });

  // class-transformer keeps what @Type and the other decorators declare in its
  // module, not globally: had npm installed the package a copy of its own, the
  // service would read none of the app's declarations, and nested classes and
  // Dates would reach handlers as plain objects and strings.
  it('uses the app’s class-transformer: a peer dependency, never a copy of its own', () => {
    expect(manifest.peerDependencies?.['class-transformer']).toBeDefined();
    expect(manifest.dependencies?.['class-transformer']).toBeUndefined();
  });

  it('schedules and handles an event, its nested Date restored, when required from plain JavaScript', async () => {
    const { stdout } = await runApp();
    expect(JSON.parse(stdout)).toEqual({ status: 'scheduled', id: 'p-1', isPing: true, at: '2026-01-02T03:04:05.000Z' });
  });

  it('lets the program exit once close() resolved, though its handler and close timeouts are far off', async () => {
    const started = performance.now();
    const outcome = await runApp().then(
      () => 'exited',
      (error: { killed?: boolean }) => (error.killed ? `still running after ${Math.round(performance.now() - started)} ms: killed` : `failed: ${String(error)}`),
    );
    expect(outcome).toBe('exited');
  });
});
