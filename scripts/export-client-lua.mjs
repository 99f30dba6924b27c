#!/usr/bin/env node
// Writes the scripts a producer in another language calls (docs/wire-format.md)
// into clients/python/reactive_delayed_events/lua/, assembled exactly as the
// Node service loads them (includes inlined, the prelude naming the arguments),
// with scripts.json: per script its KEYS by name (the names of TypeKeys,
// src/redis/type-keys.ts), its shorter key sets and its ARGV by name.
//
//   node scripts/export-client-lua.mjs          writes them (only what changed)
//   node scripts/export-client-lua.mjs --check  exits 1 when they differ from lua/
//
// Unlike src/redis/lua-sources.generated.ts these files are committed: the
// Python package must run from a checkout (PYTHONPATH=clients/python) with no
// Node build. test/client-lua.test.ts fails when they fall behind lua/.
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, expandScript } from './embed-lua.mjs';

/** The scripts a producer calls: the wire format's scripts (docs/wire-format.md). */
export const CLIENT_SCRIPTS = ['cancel', 'enqueue', 'reschedule'];

/** The wire format's version: raised when a change would break a producer written against the last one. */
export const WIRE_FORMAT_VERSION = 1;

export const CLIENT_LUA_DIR = join('clients', 'python', 'reactive_delayed_events', 'lua');

/** File name -> content of every exported file, from lua/ under `root`. */
export function clientLuaFiles(root = ROOT) {
  const files = {};
  const manifest = { wireFormat: WIRE_FORMAT_VERSION, generatedBy: 'scripts/export-client-lua.mjs', scripts: {} };
  for (const name of CLIENT_SCRIPTS) {
    const { lua, keys, variants, contract } = expandScript(join(root, 'lua'), name);
    files[`${name}.lua`] = lua;
    manifest.scripts[name] = {
      keys,
      variants,
      argv: contract.scalars.map((s) => ({ name: s.name, type: s.type })),
      lists: contract.lists.map((l) => ({ name: l.name, fields: (l.fields ?? []).map((f) => f.name) })),
    };
  }
  files['scripts.json'] = `${JSON.stringify(manifest, null, 2)}\n`;
  return files;
}

/** The names of exported files that differ from (or are missing in) the directory; extra .lua files there too. */
export function staleClientLua(root = ROOT) {
  const dir = join(root, CLIENT_LUA_DIR);
  const want = clientLuaFiles(root);
  const stale = Object.entries(want)
    .filter(([file, text]) => !existsSync(join(dir, file)) || readFileSync(join(dir, file), 'utf8') !== text)
    .map(([file]) => file);
  const extra = existsSync(dir) ? readdirSync(dir).filter((f) => (f.endsWith('.lua') || f.endsWith('.json')) && !(f in want)) : [];
  return [...stale, ...extra];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  if (process.argv.includes('--check')) {
    const stale = staleClientLua();
    if (stale.length > 0) {
      process.stderr.write(`${CLIENT_LUA_DIR} is behind lua/ (${stale.join(', ')}): run node scripts/export-client-lua.mjs\n`);
      process.exit(1);
    }
  } else {
    const dir = join(ROOT, CLIENT_LUA_DIR);
    mkdirSync(dir, { recursive: true });
    for (const [file, text] of Object.entries(clientLuaFiles())) {
      const path = join(dir, file);
      if (!existsSync(path) || readFileSync(path, 'utf8') !== text) {
        writeFileSync(path, text);
        process.stderr.write(`wrote ${join(CLIENT_LUA_DIR, file)}\n`);
      }
    }
  }
}
