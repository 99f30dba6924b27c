import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import type { Cluster, Redis } from 'ioredis';
import type { Cluster as Cluster5, Redis as Redis5 } from 'ioredis5';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DelayedEventServiceOptions } from '../src';
import { RedisServer } from './support/redis-server';
import { loadLua } from '../src/redis/lua-scripts';

const run = promisify(execFile);
const ROOT = join(__dirname, '..');
const version = (name: string) => (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;

/**
 * Type-checked by `npm run typecheck` (tsconfig.json takes test/): the `redis`
 * option takes the clients of ioredis 5 and 6, Redis and Cluster alike, though
 * to TypeScript an ioredis 5 client is no ioredis 6 one (their classes have
 * private members); and it takes no object that is not an ioredis client.
 */
export const acceptedClients = (redis5: Redis5, cluster5: Cluster5, redis6: Redis, cluster6: Cluster): Array<DelayedEventServiceOptions['redis']> => [redis5, cluster5, redis6, cluster6];
// @ts-expect-error a node-redis client, say, is no ioredis client
export const refusedClient: DelayedEventServiceOptions['redis'] = { isOpen: true, duplicate: () => undefined };

/**
 * What a user's program does with the installed package, as an ES module
 * (`import`) or as CommonJS (`require`): no tsx, no decorator syntax, its own
 * class-transformer for a nested Date. Its handler is async and it watches the
 * metrics, as a real service would; the timeouts are ten minutes, so a timer
 * of theirs left armed after close() would hold the process far longer than
 * the test waits. Arguments: the Redis URL, and `url` to hand the service that
 * URL, or the name of an ioredis package to hand it a client of its own (which
 * it quits after close()).
 */
function program(kind: 'esm' | 'cjs'): string {
  const imports =
    kind === 'esm'
      ? `import { Type } from 'class-transformer';\nimport { DelayedEvent, DelayedEventService } from 'reactive-delayed-events';\nconst load = (name) => import(name);`
      : `const { Type } = require('class-transformer');\nconst { DelayedEvent, DelayedEventService } = require('reactive-delayed-events');\nconst load = async (name) => require(name);`;
  return `${imports}
class Ping { constructor(id = '', at = new Date(0)) { this.id = id; this.at = at; } }
Type(() => Date)(Ping.prototype, 'at');
DelayedEvent('package.ping')(Ping);
(async () => {
  const [url, client = 'url'] = process.argv.slice(2);
  const tenMinutes = 600000;
  const own = client === 'url' ? undefined : new (await load(client)).Redis(url);
  const service = new DelayedEventService({ redis: own ?? url, prefix: 'pkg-' + process.pid, closeTimeoutMs: tenMinutes, handlerTimeoutMs: tenMinutes });
  service.metrics$.subscribe();
  const handled = new Promise((resolve) => service.addHandler(Ping, async (event) => (resolve(event), true), 1));
  const status = await service.enqueue(new Ping('p-1', new Date('2026-01-02T03:04:05Z')), 50);
  const event = await handled;
  await service.close();
  await own?.quit();
  console.log(JSON.stringify({ status, id: event.id, isPing: event instanceof Ping, at: event.at instanceof Date ? event.at.toISOString() : typeof event.at }));
})().catch((error) => { console.error(error); process.exit(1); });
`;
}

const HANDLED = { status: 'scheduled', id: 'p-1', isPing: true, at: '2026-01-02T03:04:05.000Z' };

/** A user of the reactive-delayed-events/prometheus subpath, as an ES module. */
const PROMETHEUS_PROGRAM = `import { DelayedEvent, DelayedEventService } from 'reactive-delayed-events';
import { registerPrometheusMetrics } from 'reactive-delayed-events/prometheus';
import { Registry } from 'prom-client';
class Ping { constructor(id = '') { this.id = id; } }
DelayedEvent('package.prom')(Ping);
const service = new DelayedEventService({ redis: process.argv[2], prefix: 'pkg-prom-' + process.pid, logger: false });
const registry = new Registry();
const registration = registerPrometheusMetrics(service, { registry });
const handled = new Promise((resolve) => service.addHandler(Ping, async () => void setImmediate(resolve), 1));
await service.enqueue(new Ping('p-1'), 0);
await handled;
// A call is counted once its result is written, a moment after the handler returns.
let line;
for (const deadline = Date.now() + 5000; line === undefined && Date.now() < deadline; await new Promise((r) => setTimeout(r, 10))) {
  line = (await registry.metrics()).split('\\n').find((l) => l.startsWith('delayed_events_handled_total{'));
}
registration.unregister();
await service.close();
console.log(JSON.stringify({ line }));
`;

/** A user mounting the reactive-delayed-events/dashboard subpath in node:http, as CommonJS: everything it serves comes from the package. */
const DASHBOARD_PROGRAM = `const { createServer } = require('node:http');
const { DelayedEventService } = require('reactive-delayed-events');
const { createDashboard } = require('reactive-delayed-events/dashboard');
(async () => {
  const service = new DelayedEventService({ redis: process.argv[2], prefix: 'pkg-dash-' + process.pid, logger: false });
  const server = createServer(createDashboard(service, { basePath: '/ops' }));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = 'http://127.0.0.1:' + server.address().port + '/ops/';
  const page = await fetch(base);
  const script = await fetch(base + 'assets/app.js');
  const overview = await (await fetch(base + 'api/overview')).json();
  server.close();
  await service.close();
  console.log(JSON.stringify({ page: page.status, script: script.status, scriptBytes: (await script.text()).length, types: overview.types }));
})().catch((error) => { console.error(error); process.exit(1); });
`;

/** A TypeScript user of the package, type-checked as an ES module (.mts) and as CommonJS (.cts). */
const TYPED_USER = `
import { DelayedEvent, DelayedEventService, InvalidOptionError, type DelayedEventServiceOptions } from 'reactive-delayed-events';
import { Redis } from 'ioredis';
import { Redis as Redis5 } from 'ioredis5';
@DelayedEvent('typed.ping')
class Ping { id = ''; }
const options: DelayedEventServiceOptions[] = [{ redis: 'redis://127.0.0.1:1' }, { redis: new Redis({ lazyConnect: true }) }, { redis: new Redis5({ lazyConnect: true }) }];
export const services: DelayedEventService[] = options.map((o) => new DelayedEventService(o));
export const enqueued: Promise<'scheduled' | 'duplicate' | 'replaced' | 'debounced' | 'throttled'> = services[0]!.enqueue(new Ping(), 10);
export const failed: Error = new InvalidOptionError('redis', 'no');
`;

describe('the published package', () => {
  let dir: string;
  let server: RedisServer;
  let packed: string[];
  let manifest: { dependencies?: Record<string, string>; peerDependencies?: Record<string, string> };
  /** Installed by npm from the tarball, with ioredis 6 (as `ioredis`) and ioredis 5 (as `ioredis5`). */
  let app: string;
  /** Installed by npm from the tarball with ioredis 5 only, as `ioredis`: the package runs on ioredis 5. */
  let app5: string;

  /**
   * Runs a program to its end and gives what it printed; fails when it fails,
   * or when it has not exited on its own within 20 s.
   */
  const runProgram = async (file: string, client = 'url', cwd = join(file, '..')): Promise<unknown> => {
    const started = performance.now();
    const { stdout } = await run(process.execPath, [file, server.url, client], { cwd, timeout: 20_000 }).catch((error: { killed?: boolean; stderr?: string }) => {
      throw new Error(error.killed ? `${file} was still running after ${Math.round(performance.now() - started)} ms: killed` : `${file} (${client}) failed: ${String(error)}\n${error.stderr ?? ''}`);
    });
    return JSON.parse(stdout) as unknown;
  };

  /** npm install as a user runs it: from the npm cache when it holds everything, else from the registry. */
  const npmInstall = async (cwd: string, specs: string[]) => {
    writeFileSync(join(cwd, 'package.json'), JSON.stringify({ name: 'rde-package-test-app', version: '0.0.0', private: true }));
    const args = ['install', '--no-audit', '--no-fund', '--loglevel=error', ...specs];
    await run('npm', ['--offline', ...args], { cwd }).catch(() => run('npm', ['--prefer-offline', ...args], { cwd }));
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rde-package-'));
    const starting = RedisServer.start();
    // npm pack runs prepack (the build) and packs what `files` names, as publishing would.
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT });
    const [report] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    packed = report!.files.map((f) => f.path);
    const tarball = join(dir, report!.filename);
    await run('tar', ['xzf', tarball, '-C', dir, 'package/package.json']);
    manifest = JSON.parse(readFileSync(join(dir, 'package', 'package.json'), 'utf8')) as typeof manifest;

    app = join(dir, 'app');
    app5 = join(dir, 'app-ioredis5');
    const ioredis5 = version('ioredis5');
    for (const cwd of [app, app5]) mkdirSync(cwd);
    await Promise.all([
      // prom-client, an optional peer, only here: app5 shows the root loads without it.
      npmInstall(app, [tarball, `class-transformer@${version('class-transformer')}`, `ioredis@${version('ioredis')}`, `ioredis5@npm:ioredis@${ioredis5}`, `prom-client@${version('prom-client')}`]),
      npmInstall(app5, [tarball, `class-transformer@${version('class-transformer')}`, `ioredis@${ioredis5}`]),
    ]);
    for (const cwd of [app, app5]) {
      writeFileSync(join(cwd, 'program.mjs'), program('esm'));
      writeFileSync(join(cwd, 'program.cjs'), program('cjs'));
    }
    writeFileSync(join(app, 'prometheus.mjs'), PROMETHEUS_PROGRAM);
    writeFileSync(join(app5, 'dashboard.cjs'), DASHBOARD_PROGRAM);
    server = await starting;
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('holds the code for import and for require, its types and source maps, the Lua scripts, its license and readme', () => {
    const scripts = (sub: string) =>
      readdirSync(join(ROOT, sub))
        .filter((f) => f.endsWith('.lua'))
        .map((f) => `${sub}/${f}`);
    const expected = ['dist/esm/index.mjs', 'dist/esm/index.mjs.map', 'dist/cjs/index.cjs', 'dist/cjs/index.cjs.map', 'dist/types/index.d.ts', 'dist/types/index.d.mts', 'dist/types/index.d.ts.map'];
    expected.push('src/index.ts', 'LICENSE', 'README.md', ...scripts('lua'), ...scripts('lua/includes'));
    // Each script as Redis runs it, for producers in other languages: the very text the service loads.
    const assembled = scripts('lua').map((path) => `dist/${path}`);
    expected.push(...assembled);
    for (const path of assembled) expect(readFileSync(join(ROOT, path), 'utf8'), path).toBe(loadLua(path.slice('dist/lua/'.length, -'.lua'.length)).lua);
    if (existsSync(join(ROOT, 'CHANGELOG.md'))) expected.push('CHANGELOG.md');
    expect(packed).toEqual(expect.arrayContaining(expected));
    expect(packed.filter((path) => /^(test|scripts|benchmarks|examples|docs|\.ci)\//.test(path) || path.startsWith('dist/test'))).toEqual([]);
  });

  // class-transformer keeps what @Type and the other decorators declare in its
  // module, not globally: had npm installed the package a copy of its own, the
  // service would read none of the app's declarations, and nested classes and
  // Dates would reach handlers as plain objects and strings. ioredis is the
  // app's too: the client it passes in is of its major.
  it('uses the app’s class-transformer and ioredis: peer dependencies, never copies of its own', () => {
    expect(manifest.peerDependencies).toEqual(expect.objectContaining({ 'class-transformer': expect.any(String), ioredis: '^5.0.0 || ^6.0.0' }));
    expect(manifest.dependencies?.['class-transformer']).toBeUndefined();
    expect(manifest.dependencies?.ioredis).toBeUndefined();
    for (const cwd of [app, app5]) {
      expect(readdirSync(join(cwd, 'node_modules', 'reactive-delayed-events'))).not.toContain('node_modules');
    }
    expect(version('ioredis')).toMatch(/^6\./);
    expect((JSON.parse(readFileSync(join(app5, 'node_modules', 'ioredis', 'package.json'), 'utf8')) as { version: string }).version).toMatch(/^5\./);
  });

  it('schedules and handles an event, its nested Date restored, when imported from an ES module', async () => {
    expect(await runProgram(join(app, 'program.mjs'))).toEqual(HANDLED);
  });

  it('exports metrics through the reactive-delayed-events/prometheus subpath, with prom-client as the app’s optional peer', async () => {
    expect(packed).toEqual(
      expect.arrayContaining(['dist/esm/prometheus.mjs', 'dist/cjs/prometheus.cjs', 'dist/types/integrations/prometheus/index.d.ts', 'dist/esm/nestjs.mjs', 'dist/esm/opentelemetry.mjs']),
    );
    expect(existsSync(join(app5, 'node_modules', 'prom-client'))).toBe(false);
    const { line } = (await runProgram(join(app, 'prometheus.mjs'))) as { line?: string };
    expect(line).toMatch(/^delayed_events_handled_total\{prefix="pkg-prom-\d+",type="package.prom",group="default",outcome="success"\} 1$/);
  });

  it('serves the dashboard through the reactive-delayed-events/dashboard subpath, its page built into the package', async () => {
    expect(packed).toEqual(expect.arrayContaining(['dist/esm/dashboard.mjs', 'dist/cjs/dashboard.cjs', 'dist/types/dashboard/index.d.ts']));
    const served = (await runProgram(join(app5, 'dashboard.cjs'))) as { page: number; script: number; scriptBytes: number; types: unknown[] };
    expect(served).toEqual({ page: 200, script: 200, scriptBytes: expect.any(Number), types: [] });
    expect(served.scriptBytes).toBeGreaterThan(20_000);
  });

  it('schedules and handles an event when required from CommonJS, and lets the program exit once close() resolved, though its timeouts are far off', async () => {
    expect(await runProgram(join(app, 'program.cjs'))).toEqual(HANDLED);
  });

  it('works bundled by esbuild into one file, run where there is no node_modules (as on AWS Lambda)', async () => {
    const lambda = join(dir, 'lambda');
    // The ES module program makes esbuild take the package's `import` build, the CommonJS one its `require` build.
    const bundles = ['program.mjs', 'program.cjs'].map(async (entry) => {
      const outfile = join(lambda, `${entry.replace('.', '-')}.bundle.cjs`);
      await build({ absWorkingDir: app, entryPoints: [entry], bundle: true, platform: 'node', format: 'cjs', target: 'node20', outfile, logLevel: 'error' });
      return outfile;
    });
    for (const bundle of await Promise.all(bundles)) {
      expect(readFileSync(bundle, 'utf8')).toContain('DelayedEventService');
      expect(await runProgram(bundle, 'url', lambda)).toEqual(HANDLED);
    }
    expect(existsSync(join(lambda, 'node_modules'))).toBe(false);
  });

  it('takes a client of ioredis 6 or of ioredis 5, whichever major it runs on itself', async () => {
    const outcomes = await Promise.all([
      // The package on ioredis 6: a client of 6, and one of 5.
      runProgram(join(app, 'program.mjs'), 'ioredis'),
      runProgram(join(app, 'program.cjs'), 'ioredis5'),
      // The package on ioredis 5: a client of 5, and the connection it opens itself from a URL.
      runProgram(join(app5, 'program.mjs'), 'ioredis'),
      runProgram(join(app5, 'program.cjs'), 'url'),
    ]);
    expect(outcomes).toEqual([HANDLED, HANDLED, HANDLED, HANDLED]);
  });

  it('gives TypeScript its types through import and require alike (module nodenext)', async () => {
    const typed = join(app, 'typed');
    mkdirSync(typed);
    writeFileSync(join(typed, 'user.mts'), TYPED_USER);
    writeFileSync(join(typed, 'user.cts'), TYPED_USER);
    const compilerOptions = {
      module: 'nodenext',
      target: 'es2022',
      strict: true,
      noEmit: true,
      experimentalDecorators: true,
      skipLibCheck: true,
      typeRoots: [join(ROOT, 'node_modules', '@types')],
      types: ['node'],
    };
    writeFileSync(join(typed, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['user.mts', 'user.cts'] }));
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const outcome = await run(process.execPath, [tsc, '-p', typed], { cwd: typed }).then(
      () => 'no errors',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    expect(outcome).toBe('no errors');
  });
});
