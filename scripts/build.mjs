#!/usr/bin/env node
// Builds the package into dist/ (npm run build, which embeds lua/ first; npm
// pack and publish run it through prepack):
//
//   dist/esm/<entry>.mjs      ES module, what `import` loads       (+ .map)
//   dist/cjs/<entry>.cjs      CommonJS, what `require` loads       (+ .map)
//   dist/types/**/*.d.ts      declarations, by tsc                 (+ .d.ts.map)
//   dist/types/<entry>.d.mts  the same declarations, for `import`
//   dist/lua/<script>.lua     each script as Redis runs it (includes inlined, arguments
//                             named), for producers in other languages: ./lua/* in exports
//
// It writes to stderr only: `npm pack --json` prints the build's stdout into its JSON.
//
// esbuild bundles each entry's own code into one file per format and leaves
// every package it imports external: rxjs, reflect-metadata, ioredis and
// class-transformer come from the user's node_modules (class-transformer and
// ioredis must: they are peers, and a copy of class-transformer would not see
// the app's decorators).
//
// To add a subpath (say ./prometheus): add it to ENTRIES and to package.json's
// `exports`, in the same shape as ".". An entry that imports src/index.ts (or
// another entry's source) gets `import ... from 'reactive-delayed-events'`
// there instead of a copy of it, so each class exists once at run time; an
// entry that imports any other module another entry also holds fails the build
// (a second copy would break instanceof and shared state).
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { writeAssembledScripts } from './embed-lua.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));

/** subpath: the key in package.json `exports`; source: its module under src/; name: its files' name in dist/. */
const ENTRIES = [
  { subpath: '.', source: 'src/index.ts', name: 'index' },
  // Integrations: each loads its third-party packages (optional peers) only when its subpath is imported.
  { subpath: './prometheus', source: 'src/integrations/prometheus/index.ts', name: 'prometheus' },
  { subpath: './opentelemetry', source: 'src/integrations/opentelemetry/index.ts', name: 'opentelemetry' },
  { subpath: './nestjs', source: 'src/integrations/nestjs/index.ts', name: 'nestjs' },
  // The dashboard's page is built beforehand (scripts/build-dashboard-ui.mjs) into a module this entry imports.
  { subpath: './dashboard', source: 'src/dashboard/index.ts', name: 'dashboard' },
];

/**
 * Command-line programs, package.json's `bin`: dist/<dir>/<name>.cjs,
 * CommonJS only, starting with a #! line. Like any user, a program imports the
 * package's root (src/index.ts becomes `require('reactive-delayed-events')`,
 * which Node resolves to this package itself), so it holds no copy of the library.
 */
const BINS = [{ source: 'src/cli/main.ts', name: 'main', dir: 'cli' }];

/**
 * Bare require() calls in src/ and what the ES module build imports instead
 * (an ES module has no require). class-transformer keeps its decorator
 * registry in cjs/storage and exports it nowhere else; Node's ESM loader wants
 * the file's extension.
 */
const ESM_IMPORT_FOR_REQUIRE = { 'class-transformer/cjs/storage': 'class-transformer/cjs/storage.js' };

const sourcePath = (entry) => resolve(ROOT, entry.source);
const packageSpecifier = (entry) => (entry.subpath === '.' ? manifest.name : `${manifest.name}/${entry.subpath.slice(2)}`);

/** Imports of another entry's source become imports of the package itself (see the top of this file). */
function otherEntriesAsPackage(current) {
  const others = new Map(ENTRIES.filter((e) => e !== current).map((e) => [sourcePath(e), packageSpecifier(e)]));
  return {
    name: 'other-entries-as-package',
    setup(b) {
      if (others.size === 0) return;
      b.onResolve({ filter: /^\./ }, async (args) => {
        if (args.pluginData === 'inner') return undefined;
        const found = await b.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: 'inner' });
        if (found.errors.length > 0) return { errors: found.errors };
        const specifier = others.get(found.path);
        return specifier ? { path: specifier, external: true } : { path: found.path };
      });
    },
  };
}

/** In the ES module build: require('x') of src/ becomes an import (ESM_IMPORT_FOR_REQUIRE). */
const requireAsImport = {
  name: 'require-as-import',
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) => {
      if (args.kind !== 'require-call') return undefined;
      const target = ESM_IMPORT_FOR_REQUIRE[args.path];
      if (!target) return { errors: [{ text: `require('${args.path}') has no ES module counterpart: add one to ESM_IMPORT_FOR_REQUIRE in scripts/build.mjs, or import it` }] };
      return { path: target, namespace: 'require-as-import' };
    });
    b.onLoad({ filter: /.*/, namespace: 'require-as-import' }, (args) => ({ contents: `export * from ${JSON.stringify(args.path)};`, loader: 'js', resolveDir: ROOT }));
  },
};

async function bundle(entry, format) {
  const esm = format === 'esm';
  const bin = BINS.includes(entry);
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: { [entry.name]: entry.source },
    outdir: join(DIST, bin ? entry.dir : format),
    ...(bin ? { banner: { js: '#!/usr/bin/env node' } } : {}),
    outExtension: { '.js': esm ? '.mjs' : '.cjs' },
    format,
    platform: 'node',
    target: 'node20',
    bundle: true,
    packages: 'external',
    tsconfig: 'tsconfig.build.json',
    sourcemap: true,
    // No keepNames: it wraps every named function and arrow function in a call that
    // defines its `name` each time it is made, which costs every closure made per
    // handled type or per call a property store (7 KB of heap per handled type;
    // 4-5 % of an awaited enqueue's time, benchmarks/README.md). Renames it would
    // prevent are refused instead: see checkExportedNames().
    keepNames: false,
    metafile: true,
    logLevel: 'warning',
    plugins: [otherEntriesAsPackage(entry), ...(esm ? [requireAsImport] : [])],
  });
  return { entry, format, inputs: Object.keys(result.metafile.inputs).filter((input) => input.startsWith('src/')) };
}

/** Fails when one module of src/ went into two entries of one format. */
function checkOneCopyEach(builds) {
  for (const format of ['esm', 'cjs']) {
    const owner = new Map();
    for (const { entry, inputs } of builds.filter((b) => b.format === format)) {
      for (const input of inputs) {
        if (owner.has(input)) {
          throw new Error(`${input} is bundled into both ${owner.get(input)} and ${entry.name}: import it through ${ENTRIES[0].source} (the package's root) so it exists once`);
        }
        owner.set(input, entry.name);
      }
    }
  }
}

function declarations() {
  const tsc = join(dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json')], { cwd: ROOT, stdio: [0, 2, 2] });
  if (run.status !== 0) throw new Error(`tsc -p tsconfig.build.json failed (exit ${run.status})`);
  // package.json has no "type", so TypeScript reads dist/types/*.d.ts as
  // CommonJS; `import` gets a .d.mts (an ES module) that re-exports them, so
  // both conditions share one set of types. (export * carries no default
  // export: an entry with one would need it re-exported by name here.)
  for (const entry of ENTRIES) {
    const declaration = join(DIST, 'types', relative('src', entry.source)).replace(/\.ts$/, '.d.ts');
    if (!existsSync(declaration)) throw new Error(`tsc wrote no ${relative(ROOT, declaration)}`);
    const js = `./${basename(declaration, '.d.ts')}.js`;
    writeFileSync(declaration.replace(/\.d\.ts$/, '.d.mts'), `export * from '${js}';\n`);
  }
}

/**
 * Without keepNames, esbuild renames a class or function whose name another
 * one in the bundle already has (Foo becomes Foo2), and errors take their
 * `name` from their class (src/core/errors.ts): every export must keep the
 * name it is exported under.
 */
function checkExportedNames() {
  const require = createRequire(import.meta.url);
  const renamed = [];
  for (const entry of ENTRIES) {
    const exported = require(join(DIST, 'cjs', `${entry.name}.cjs`));
    for (const [key, value] of Object.entries(exported)) {
      if (typeof value === 'function' && value.name !== key) renamed.push(`${entry.subpath}: ${key} is named ${value.name}`);
    }
  }
  if (renamed.length > 0) throw new Error(`the bundle renamed exports (rename the duplicate in src/): ${renamed.join('; ')}`);
}

/** Every file package.json's exports, main, module and types name must now exist. */
function checkManifestTargets() {
  const targets = [];
  const walk = (value) => {
    if (typeof value === 'string') targets.push(value);
    else if (value && typeof value === 'object') Object.values(value).forEach(walk);
  };
  walk(manifest.exports);
  // A subpath pattern (./lua/*) names a directory's files, not one file.
  for (let i = targets.length - 1; i >= 0; i--) if (targets[i].includes('*')) targets[i] = dirname(targets[i]);
  walk([manifest.main, manifest.module, manifest.types, manifest.bin]);
  const missing = targets.filter((target) => !existsSync(join(ROOT, target)));
  if (missing.length > 0) throw new Error(`package.json names files the build did not write: ${missing.join(', ')}`);
}

const started = performance.now();
rmSync(DIST, { recursive: true, force: true });
mkdirSync(DIST);
const builds = await Promise.all([...ENTRIES.flatMap((entry) => [bundle(entry, 'esm'), bundle(entry, 'cjs')]), ...BINS.map((bin) => bundle(bin, 'cjs'))]);
checkOneCopyEach(builds);
for (const bin of BINS) chmodSync(join(DIST, bin.dir, `${bin.name}.cjs`), 0o755);
writeAssembledScripts(join(DIST, 'lua'));
declarations();
checkManifestTargets();
checkExportedNames();
console.error(`built dist/ (${ENTRIES.map((e) => e.subpath).join(', ')}; ${BINS.map((b) => `${b.dir}/${b.name}.cjs`).join(', ')}) in ${Math.round(performance.now() - started)} ms`);
