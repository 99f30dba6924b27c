import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLIENT_LUA_DIR, CLIENT_SCRIPTS, WIRE_FORMAT_VERSION, clientLuaFiles, staleClientLua } from '../scripts/export-client-lua.mjs';
import { ROOT } from '../scripts/embed-lua.mjs';
import { LUA_SOURCES } from '../src/redis/lua-sources.generated';
import { RedisLayout } from '../src/redis/redis-layout';

/**
 * The Python package carries the scripts it calls as plain files (committed, so
 * it runs from a checkout with no Node build). They must be the very text the
 * Node service loads, and docs/wire-format.md must name their keys and arguments as their headers do.
 */
describe('the scripts other producers call', () => {
  it('are in clients/python exactly as the Node service loads them', () => {
    expect(staleClientLua(), 'run node scripts/export-client-lua.mjs').toEqual([]);
    for (const name of CLIENT_SCRIPTS) {
      const source = LUA_SOURCES[name as keyof typeof LUA_SOURCES];
      expect(readFileSync(join(ROOT, CLIENT_LUA_DIR, `${name}.lua`), 'utf8'), name).toBe(source.lua);
      const manifest = JSON.parse(clientLuaFiles()['scripts.json']!) as { scripts: Record<string, { keys: string[] }> };
      expect(manifest.scripts[name]!.keys, name).toEqual(source.keys);
    }
  });

  it('are documented in docs/wire-format.md with the keys and arguments of their headers', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'wire-format.md'), 'utf8');
    // The key of each name, as the page's table gives it, is RedisLayout's.
    const keys = new RedisLayout('dq').forType('t') as unknown as Record<string, string>;
    const suffixes = [...doc.matchAll(/^\| `([A-Za-z]+)` \| `([a-z]+)` \|/gm)];
    expect(suffixes.length).toBeGreaterThanOrEqual(13);
    for (const [, name, suffix] of suffixes) expect(keys[name!], name).toBe(`dq:{t}:${suffix}`);
    expect(doc).toContain(`Wire format ${WIRE_FORMAT_VERSION}`);
    const manifest = JSON.parse(clientLuaFiles()['scripts.json']!) as {
      scripts: Record<string, { keys: string[]; argv: Array<{ name: string }>; lists: Array<{ name: string; fields: string[] }> }>;
    };
    for (const [name, spec] of Object.entries(manifest.scripts)) {
      // Each script's section lists KEYS and ARGV in the header's order, one table row each.
      const section = doc.split(`\n### ${name}\n`)[1]?.split('\n### ')[0] ?? '';
      expect(section, `a '### ${name}' section`).not.toBe('');
      const found = [...section.matchAll(/^\| (KEYS|ARGV)\[([\d.]+)\] \| `([A-Za-z_]+)` \|/gm)];
      // KEYS numbered 1, 2, 3... as in the header.
      found.filter((m) => m[1] === 'KEYS').forEach((m, i) => expect(m[2], `${name} KEYS[${i + 1}]`).toBe(String(i + 1)));
      const rows = found.map((m) => `${m[1]} ${m[3]}`);
      const want = [...spec.keys.map((k) => `KEYS ${k}`), ...spec.argv.map((a) => `ARGV ${a.name}`), ...spec.lists.flatMap((l) => l.fields.map((f) => `ARGV ${f}`))];
      expect(rows, name).toEqual(want);
    }
  });
});
