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
//   also takes: its first keys, so that each key has one position in every call
//   (enqueue's plain calls).
// - its contract, from its header's `-- ARGV` and `-- REPLY` lines
//   (scripts/lua-contract.mjs): a Lua prelude binds each argument to a local of
//   its name, and the module gets the types, encoder and decoder that
//   src/redis/lua-scripts.ts calls with, so a header and its caller cannot
//   disagree without the type check failing.
//
//   node scripts/embed-lua.mjs           writes the module (only when it changed)
//
// The module is built, never committed (.gitignore): `npm install` (prepare),
// npm test, typecheck, build and the tests' global setup write it. The output
// depends on the scripts' text alone (files in name order, no dates), so
// writing it twice gives the same bytes (test/embedded-lua.test.ts checks).
// It writes to stderr only: `npm pack --json` prints the build's stdout into its JSON.
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { argsType, decoderSource, encoderSource, luaPrelude, positionalReads, readContract, replyType } from './lua-contract.mjs';

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

/** The locals a Lua text declares with `local` (not loop variables or parameters). */
function declaredLocals(lua) {
  const names = new Set();
  for (const m of lua.replace(/--.*$/gm, '').matchAll(/\blocal\s+(?:function\s+(\w+)|([\w\s,]+?)\s*(?:=|\n|$))/gm)) {
    if (m[1]) names.add(m[1]);
    else for (const name of m[2].split(',')) names.add(name.trim());
  }
  return names;
}

/**
 * One script of `luaDir`: its includes inlined (each once) after the prelude
 * that names its arguments, its keys by name, its argument and reply contract
 * (scripts/lua-contract.mjs), and the commands it may run.
 */
export function expandScript(luaDir, name) {
  const from = `lua/${name}.lua`;
  const source = read(join(luaDir, `${name}.lua`));
  const contract = readContract(source, from);
  const body = expandLua(luaDir, source, from);
  const reads = positionalReads(body);
  if (reads.length > 0) throw new Error(`${from} reads ARGV by position (${reads[0].trim()}): declare the argument in its header and use its name`);
  const prelude = luaPrelude(contract);
  const bound = [...contract.scalars.map((s) => s.name), ...contract.lists.flatMap((l) => [`${l.name}_at`, `${l.name}_n`])];
  // The script's own locals, and those its includes declare at their top level (not inside their functions).
  const declared = new Set([
    ...declaredLocals(source),
    ...declaredLocals(
      body
        .split('\n')
        .filter((line) => line.startsWith('local '))
        .join('\n'),
    ),
  ]);
  for (const local of bound) if (declared.has(local)) throw new Error(`${from} declares a local '${local}', the name of one of its arguments: rename one`);
  // The prelude goes where the header ends: before the first line of code.
  const lines = body.split('\n');
  const first = lines.findIndex((line) => line.trim() !== '' && !line.startsWith('--'));
  const lua = first < 0 ? `${body}\n${prelude}\n` : [...lines.slice(0, first), prelude, ...lines.slice(first)].join('\n');
  const declaredKeys = [...source.matchAll(KEYS)].map((m) => ({ n: Number(m[1]), key: m[2] }));
  declaredKeys.forEach((d, i) => {
    if (d.n !== i + 1) throw new Error(`${from} declares KEYS[${d.n}] where KEYS[${i + 1}] comes next: number its keys 1, 2, 3...`);
  });
  const keys = declaredKeys.map((d) => d.key);
  const variants = Object.fromEntries([...source.matchAll(KEY_VARIANT)].map((m) => [m[1], m[2].trim().split(/\s+/)]));
  for (const [variant, names] of Object.entries(variants)) {
    // A shorter set is the first keys of the full one: each key has one position in every call.
    if (names.some((key, i) => keys[i] !== key)) throw new Error(`${from}: KEYS(${variant}) must be its first ${names.length} KEYS, in order (${keys.slice(0, names.length).join(' ')})`);
  }
  // The commands the script may run, includes too: what an ACL user needs for it (src/redis/permissions.ts).
  const commands = [...new Set([...lua.matchAll(COMMAND)].map((m) => m[1]))].sort();
  return { lua, numberOfKeys: keys.length, keys, variants, commands, contract };
}

/** A template literal holding `text` exactly. */
function templateLiteral(text) {
  return '`' + text.replace(/\\/g, '\\\\').replace(/`/g, '\\`').replace(/\$\{/g, '\\${') + '`';
}

/** The text of src/redis/lua-sources.generated.ts for the scripts under `root`/lua. */
export function embedLua(root = ROOT) {
  const luaDir = join(root, 'lua');
  const names = scriptNames(luaDir);
  const list = (names) => `[${names.map((k) => `'${k}'`).join(', ')}]`;
  const scripts = names.map((name) => ({ name, ...expandScript(luaDir, name) }));
  const entries = scripts.map(({ name, lua, keys, variants, commands, contract }) => {
    const variantText = Object.entries(variants)
      .map(([variant, names]) => `${variant}: ${list(names)}`)
      .join(', ');
    const encoder = encoderSource(contract);
    const param = /\ba\./.test(encoder) ? 'a' : '_a';
    return [
      `  '${name}': {`,
      `    keys: ${list(keys)},`,
      `    variants: { ${variantText} },`,
      `    commands: ${list(commands)},`,
      `    encode: (${param}, v = []) => { ${encoder} },`,
      `    decode: (r) => { ${decoderSource(contract, `LuaReplies['${name}']`)} },`,
      `    lua: ${templateLiteral(lua)},`,
      '  },',
      '',
    ].join('\n');
  });
  return [
    '// Generated by scripts/embed-lua.mjs from lua/, which stays the source of truth: built, never committed.',
    "// npm test, npm run build, npm run typecheck, the tests' global setup and `npm install` write it.",
    '',
    '/**',
    ' * A script of lua/ with its `-- @include` lines inlined after the prelude that names its arguments,',
    ' * its keys by name in order (and the shorter sets it also takes: its first keys), the commands it may',
    ' * run, and its contract: the encoder of its arguments and the decoder of its reply, from its header.',
    ' */',
    'export interface EmbeddedLua<A, R> {',
    '  readonly lua: string;',
    '  readonly keys: readonly string[];',
    '  readonly variants: Readonly<Record<string, readonly string[]>>;',
    '  readonly commands: readonly string[];',
    "  /** Appends the arguments to `into` (a call's keys, say: one array for the whole call), and returns it. */",
    '  readonly encode: (args: A, into?: Array<string | number>) => Array<string | number>;',
    '  readonly decode: (reply: unknown) => R;',
    '}',
    '',
    "/** Each script's arguments, by the names of its header's `-- ARGV` lines. */",
    'export interface LuaArgs {',
    ...scripts.map(({ name, contract }) => `  '${name}': ${argsType(contract)};`),
    '}',
    '',
    "/** Each script's reply, by the names of its header's `-- REPLY` line. */",
    'export interface LuaReplies {',
    ...scripts.map(({ name, contract }) => `  '${name}': ${replyType(contract)};`),
    '}',
    '',
    'export type LuaScriptName = keyof LuaArgs;',
    '',
    'export const LUA_SOURCES: { readonly [N in LuaScriptName]: EmbeddedLua<LuaArgs[N], LuaReplies[N]> } = {',
    entries.join('') + '};',
    '',
  ].join('\n');
}

/** The names of the scripts of `luaDir` (its *.lua files), in order. */
function scriptNames(luaDir) {
  return readdirSync(luaDir)
    .filter((file) => file.endsWith('.lua'))
    .map((file) => file.slice(0, -'.lua'.length))
    .sort();
}

/**
 * Writes src/redis/lua-sources.generated.ts under `root` when it differs from
 * what lua/ gives now; true when it wrote. The tests' global setup, npm test,
 * typecheck, build and `npm install` (prepare) call it.
 */
export function ensureEmbeddedLua(root = ROOT) {
  const target = join(root, GENERATED);
  const wanted = embedLua(root);
  let current;
  try {
    current = readFileSync(target, 'utf8');
  } catch {
    current = undefined;
  }
  if (current === wanted) return false;
  writeFileSync(target, wanted);
  return true;
}

/**
 * Writes each script as Redis runs it (includes inlined, arguments named: the
 * text the service loads) to `dir`/<name>.lua, for producers in other
 * languages (docs/redis-layout.md, "The scripts as files"); the package ships them as dist/lua/.
 */
export function writeAssembledScripts(dir, root = ROOT) {
  const luaDir = join(root, 'lua');
  mkdirSync(dir, { recursive: true });
  const names = scriptNames(luaDir);
  for (const name of names) writeFileSync(join(dir, `${name}.lua`), expandScript(luaDir, name).lua);
  return names;
}

function main() {
  const wrote = ensureEmbeddedLua(ROOT);
  console.error(wrote ? `wrote ${GENERATED}` : `${GENERATED} is up to date`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main();
