#!/usr/bin/env node
// Embeds the Lua scripts of lua/ in src/redis/lua-sources.generated.ts, so the
// service never reads a file at run time: a bundle (esbuild, webpack, a Lambda
// zip) holds the scripts like any other code.
//
// lua/ stays the source of truth. Each lua/<name>.lua becomes one entry:
// - its `-- @include <include>` lines are replaced by lua/includes/<include>.lua,
//   whose own @include lines are followed first. Each include is inlined once
//   per script, before the first that needs it (BullMQ's loader does the same),
//   so a script carries only the functions it uses; a cycle is an error.
// - its keys, in order, from its header's `-- KEYS[n] <name>: ...` lines, where
//   <name> is a field of TypeKeys (src/redis/redis-layout.ts) or a key the
//   caller gives by name (claimLog). src/redis/lua-scripts.ts builds each call's
//   KEYS from this list, so adding a key is a change to the header alone. A
//   `-- KEYS(<variant>) <name> <name> ...` line names a shorter set the script
//   also takes (enqueue's plain calls).
//
//   node scripts/embed-lua.mjs           writes the module (only when it changed)
//   node scripts/embed-lua.mjs --check   exits 1 when the module is out of date
//   EMBED_LUA=check (environment)         the same, wherever it runs: test/package.test.ts
//                                         packs with it, so a test never rewrites src/
//
// test/embedded-lua.test.ts imports embedLua() and fails when the committed
// module differs from what lua/ gives now. The output depends on the scripts'
// text alone (files in name order, no dates), so running it twice changes nothing.
// It writes to stderr only: `npm pack --json` prints the build's stdout into its JSON.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const GENERATED = join('src', 'redis', 'lua-sources.generated.ts');

const INCLUDE = /^-- @include (\S+)$/gm;
const KEYS = /^-- KEYS\[(\d+)\] ([A-Za-z]+):/gm;
const KEY_VARIANT = /^-- KEYS\((\w+)\) ([A-Za-z ]+)$/gm;
const COMMAND = /redis\.p?call\('([A-Z]+)'/g;

const read = (file) => readFileSync(file, 'utf8').replace(/\r\n/g, '\n');

/** Lua text whose `-- @include` lines are replaced by lua/includes/ (each once, what they need first); `from` names it in errors. */
export function expandLua(luaDir, source, from = 'the Lua text') {
  const included = new Set();
  const open = [];
  const expand = (text, from) =>
    text.replace(INCLUDE, (_, include) => {
      if (open.includes(include)) throw new Error(`lua includes form a cycle: ${[...open, include].join(' -> ')}`);
      if (included.has(include)) return `-- (${include}: included above)`;
      let body;
      try {
        body = read(join(luaDir, 'includes', `${include}.lua`));
      } catch (error) {
        throw new Error(`${from} includes '${include}', but lua/includes/${include}.lua cannot be read (${error.code ?? error.message})`);
      }
      open.push(include);
      const expanded = expand(body, `lua/includes/${include}.lua`).replace(/\n+$/, '');
      open.pop();
      included.add(include);
      return expanded;
    });
  return expand(source, from);
}

/** One script of `luaDir`, its includes inlined (each once), its keys by name, and the commands it may run. */
export function expandScript(luaDir, name) {
  const source = read(join(luaDir, `${name}.lua`));
  const lua = expandLua(luaDir, source, `lua/${name}.lua`);
  const declared = [...source.matchAll(KEYS)].map((m) => ({ n: Number(m[1]), key: m[2] }));
  declared.forEach((d, i) => {
    if (d.n !== i + 1) throw new Error(`lua/${name}.lua declares KEYS[${d.n}] where KEYS[${i + 1}] comes next: number its keys 1, 2, 3...`);
  });
  const keys = declared.map((d) => d.key);
  const variants = Object.fromEntries([...source.matchAll(KEY_VARIANT)].map((m) => [m[1], m[2].trim().split(/\s+/)]));
  for (const [variant, names] of Object.entries(variants)) {
    for (const key of names) if (!keys.includes(key)) throw new Error(`lua/${name}.lua: KEYS(${variant}) names ${key}, which is none of its KEYS[n]`);
  }
  // The commands the script may run, includes too: what an ACL user needs for it (src/redis/permissions.ts).
  const commands = [...new Set([...lua.matchAll(COMMAND)].map((m) => m[1]))].sort();
  return { lua, numberOfKeys: keys.length, keys, variants, commands };
}

/** A template literal holding `text` exactly. */
function templateLiteral(text) {
  return '`' + text.replace(/\\/g, '\\\\').replace(/`/g, '\\`').replace(/\$\{/g, '\\${') + '`';
}

/** The text of src/redis/lua-sources.generated.ts for the scripts under `root`/lua. */
export function embedLua(root = ROOT) {
  const luaDir = join(root, 'lua');
  const names = readdirSync(luaDir)
    .filter((file) => file.endsWith('.lua'))
    .map((file) => file.slice(0, -'.lua'.length))
    .sort();
  const entries = names.map((name) => {
    const { lua, keys, variants, commands } = expandScript(luaDir, name);
    const list = (names) => `[${names.map((k) => `'${k}'`).join(', ')}]`;
    const variantText = Object.entries(variants)
      .map(([variant, names]) => `${variant}: ${list(names)}`)
      .join(', ');
    return `  '${name}': {\n    keys: ${list(keys)},\n    variants: { ${variantText} },\n    commands: ${list(commands)},\n    lua: ${templateLiteral(lua)},\n  },\n`;
  });
  return [
    '// Generated by scripts/embed-lua.mjs from lua/, which stays the source of truth: do not edit.',
    '// After changing lua/, run `npm run embed-lua` (npm run build runs it too) and commit this file.',
    '',
    '/** A script of lua/ with its `-- @include` lines inlined, its keys by name in order (and shorter sets it also takes), and the commands it may run. */',
    'export interface EmbeddedLua {',
    '  readonly lua: string;',
    '  readonly keys: readonly string[];',
    '  readonly variants: Readonly<Record<string, readonly string[]>>;',
    '  readonly commands: readonly string[];',
    '}',
    '',
    `export type LuaScriptName = ${names.map((name) => `'${name}'`).join(' | ') || 'never'};`,
    '',
    'export const LUA_SOURCES: Readonly<Record<LuaScriptName, EmbeddedLua>> = {',
    entries.join('') + '};',
    '',
  ].join('\n');
}

function main(args) {
  const target = join(ROOT, GENERATED);
  const wanted = embedLua(ROOT);
  let current;
  try {
    current = readFileSync(target, 'utf8');
  } catch {
    current = undefined;
  }
  if (args.includes('--check') || process.env.EMBED_LUA === 'check') {
    if (current === wanted) return;
    console.error(`${GENERATED} is out of date with lua/: run \`npm run embed-lua\` and commit it`);
    process.exitCode = 1;
    return;
  }
  if (current === wanted) {
    console.error(`${GENERATED} is up to date`);
  } else {
    writeFileSync(target, wanted);
    console.error(`wrote ${relative(process.cwd(), target) || GENERATED}`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main(process.argv.slice(2));
