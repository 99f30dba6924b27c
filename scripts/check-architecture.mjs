#!/usr/bin/env node
// Checks the shape of src/ that docs/architecture.md draws, from the imports
// alone (npm run lint runs it; test/architecture.test.ts holds it too):
//
// - no import cycle among src/ modules;
// - each layer imports only the layers below it:
//     core     -> nothing of the project
//     redis    -> core
//     runtime  -> redis, core
//     service  -> runtime, redis, core
//     src/index.ts, the public entry, -> any of those
//   and cli, dashboard and integrations import only the public entry points
//   (src/index.ts and the subpath entries of package.json `exports`), besides
//   their own folder: they use the library as any application does;
// - only src/redis/ (and runtime/, whose loops are its callers) sends Redis
//   commands: service, cli, dashboard and integrations call src/redis/, which
//   alone knows the storage format.
//
// - no hand-written file of src/ or lua/ is over MAX_LINES lines (generated
//   ones aside): a file that long does several things, and the next feature
//   would land in it too.
//
//   node scripts/check-architecture.mjs     prints each problem; exits 1 if any
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** What each layer may import, besides itself. */
const ALLOWED = {
  core: [],
  redis: ['core'],
  runtime: ['redis', 'core'],
  service: ['runtime', 'redis', 'core'],
  index: ['service', 'runtime', 'redis', 'core'],
};
/** Layers that stand on the public entry points alone. */
const CONSUMERS = ['cli', 'dashboard', 'integrations'];
/** The public entry points: the package's root and its subpath exports. */
const PUBLIC_ENTRIES = ['src/index.ts', 'src/dashboard/index.ts', 'src/integrations/prometheus/index.ts', 'src/integrations/opentelemetry/index.ts', 'src/integrations/nestjs/index.ts'];

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'([^']+)'|(?:^|\n)\s*import\s+'([^']+)'|\brequire\('([^']+)'\)|\bimport\('([^']+)'\)/g;

function sourceFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

function resolveImport(from, specifier) {
  const base = resolve(dirname(from), specifier);
  for (const candidate of [`${base}.ts`, `${base}.tsx`, join(base, 'index.ts'), base]) {
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not this one.
    }
  }
  return undefined;
}

/** The layer of a module under src/: its first folder, or 'index' for src/index.ts. */
function layerOf(root, file) {
  const path = relative(join(root, 'src'), file).split(/[\\/]/);
  if (path.length === 1) return path[0] === 'index.ts' ? 'index' : path[0];
  // The dashboard's page runs in the browser: a layer of its own, importing its folder and npm packages.
  if (path[0] === 'dashboard' && path[1] === 'ui') return 'dashboard-ui';
  return path[0];
}

/** Every module of src/ and the project modules it imports (relative paths from the root). */
export function importGraph(root = ROOT) {
  const graph = new Map();
  for (const file of sourceFiles(join(root, 'src'))) {
    const text = readFileSync(file, 'utf8');
    const imports = [];
    for (const match of text.matchAll(IMPORT)) {
      const specifier = match[1] ?? match[2] ?? match[3] ?? match[4];
      if (!specifier?.startsWith('.')) continue;
      const target = resolveImport(file, specifier);
      if (target) imports.push(relative(root, target));
    }
    graph.set(relative(root, file), imports);
  }
  return graph;
}

/** Each import cycle, as the modules along it (the first repeated at the end). */
export function findCycles(graph) {
  const cycles = [];
  const state = new Map(); // module -> 'open' | 'done'
  const stack = [];
  const visit = (module) => {
    state.set(module, 'open');
    stack.push(module);
    for (const next of graph.get(module) ?? []) {
      if (state.get(next) === 'open') cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(module, 'done');
  };
  for (const module of [...graph.keys()].sort()) if (!state.has(module)) visit(module);
  return cycles;
}

/** Layers that send no Redis command of their own, and the commands looked for (a call `.hget(` and so on). */
const NO_COMMANDS = ['service', 'cli', 'dashboard', 'integrations'];
const COMMAND_CALL =
  /\.(hget|hset|hmget|hgetall|hkeys|hdel|hlen|hexists|zrange|zadd|zrem|zscore|zcard|zcount|lrange|llen|lpos|scan|multi|pipeline|eval|evalsha|publish|ping|exists|sendCommand|flushall|info)\(/g;

/** Each Redis command a module of those layers sends itself, said in a line. */
export function commandProblems(root = ROOT) {
  const problems = [];
  for (const file of sourceFiles(join(root, 'src'))) {
    const layer = layerOf(root, file);
    if (!NO_COMMANDS.includes(layer) || file.endsWith('.generated.ts')) continue;
    const text = readFileSync(file, 'utf8')
      .replace(/\/\/.*$/gm, '')
      .replace(/\/\*[\s\S]*?\*\//g, '');
    for (const match of text.matchAll(COMMAND_CALL)) problems.push(`${relative(root, file)} sends ${match[1].toUpperCase()} itself: ${layer} calls src/redis/, which alone knows the storage format`);
  }
  return problems;
}

/** Each import that crosses the layers the wrong way, said in a line. */
export function layeringProblems(graph, root = ROOT) {
  const problems = [];
  for (const [from, imports] of graph) {
    const layer = layerOf(root, join(root, from));
    for (const to of imports) {
      const target = layerOf(root, join(root, to));
      if (target === layer) continue;
      const publicEntry = PUBLIC_ENTRIES.includes(to);
      if (CONSUMERS.includes(layer) || layer === 'dashboard-ui') {
        if (!publicEntry || layer === 'dashboard-ui') problems.push(`${from} imports ${to}: ${layer} may import only the public entry points (${PUBLIC_ENTRIES[0]} and the subpath entries)`);
        continue;
      }
      const allowed = ALLOWED[layer];
      if (!allowed) {
        problems.push(`${from} is in no known layer (${layer}): put it under core, redis, runtime or service, or add its layer to scripts/check-architecture.mjs`);
        break;
      }
      if (!allowed.includes(target)) problems.push(`${from} imports ${to}: ${layer} may import ${allowed.length > 0 ? allowed.join(', ') : 'nothing of the project'}`);
    }
  }
  return problems;
}

/** The most lines a hand-written file of src/ or lua/ may have. */
export const MAX_LINES = 400;

/** Each hand-written file of src/ and lua/ over MAX_LINES lines, said in a line. */
export function sizeProblems(root = ROOT) {
  const problems = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(ts|tsx|mts|lua)$/.test(name) && !name.includes('.generated.')) {
        const lines = readFileSync(path, 'utf8').split('\n').length - 1;
        if (lines > MAX_LINES) problems.push(`${relative(root, path)} has ${lines} lines, over ${MAX_LINES}: split it by what its parts do`);
      }
    }
  };
  walk(join(root, 'src'));
  walk(join(root, 'lua'));
  return problems;
}

function main() {
  const graph = importGraph(ROOT);
  const problems = [...findCycles(graph).map((cycle) => `import cycle: ${cycle.join(' -> ')}`), ...layeringProblems(graph, ROOT), ...commandProblems(ROOT), ...sizeProblems(ROOT)];
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(`${problems.length} architecture problem(s); docs/architecture.md gives the layers, CONTRIBUTING.md the file sizes`);
    process.exitCode = 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main();
