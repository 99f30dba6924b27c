import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GENERATED, ROOT, embedLua, expandScript } from '../scripts/embed-lua.mjs';
import { RedisLayout } from '../src/redis/redis-layout';
import { loadLua } from '../src/redis/lua-scripts';

/**
 * The service runs the scripts compiled into src/redis/lua-sources.generated.ts,
 * never lua/ itself: an edit of lua/ counts only once `npm run embed-lua` has
 * written it there.
 */
describe('the embedded Lua scripts', () => {
  it('are what lua/ holds now', () => {
    const committed = readFileSync(join(ROOT, GENERATED), 'utf8');
    const fromLua = embedLua(ROOT);
    if (committed !== fromLua) {
      expect.fail(`${GENERATED} does not match lua/: run \`npm run embed-lua\` and commit it (npm run build does it too)`);
    }
  });

  it('hold every script with its includes inlined and its keys counted', () => {
    const names = readdirSync(join(ROOT, 'lua'))
      .filter((file) => file.endsWith('.lua'))
      .map((file) => file.slice(0, -'.lua'.length));
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) {
      const { lua, numberOfKeys } = loadLua(name);
      expect(lua, name).not.toMatch(/^-- @include /m);
      expect(numberOfKeys, name).toBeGreaterThan(0);
      // Every key the header declares, and no more: the header is what sets numberOfKeys.
      expect(lua, name).toContain(`-- KEYS[${numberOfKeys}]`);
      expect(lua, name).not.toContain(`-- KEYS[${numberOfKeys + 1}]`);
    }
    expect(() => loadLua('no-such-script')).toThrow(/no Lua script 'no-such-script'/);
  });

  it('inline each include in place of its line, byte for byte', () => {
    const source = readFileSync(join(ROOT, 'lua', 'enqueue.lua'), 'utf8');
    const include = /^-- @include (\S+)$/m.exec(source)?.[1];
    expect(include).toBeDefined();
    const text = readFileSync(join(ROOT, 'lua', 'includes', `${include}.lua`), 'utf8')
      .replace(/^-- @include .*\n/gm, '')
      .trim();
    expect(loadLua('enqueue').lua).toContain(text);
  });

  it('carry each function they use once, and none they do not', () => {
    for (const name of scriptNames()) {
      const code = loadLua(name).lua.replace(/--.*$/gm, '');
      const defined = [...code.matchAll(/local function (\w+)/g)].map((m) => m[1]!);
      expect(new Set(defined).size, `${name}: a function defined twice`).toBe(defined.length);
      for (const fn of defined) expect((code.match(new RegExp(`\\b${fn}\\b`, 'g')) ?? []).length, `${name} defines ${fn} and never calls it`).toBeGreaterThan(1);
    }
    // cancel and a replacing enqueue remove an event from any state with the one helper.
    for (const name of ['cancel', 'enqueue']) expect(loadLua(name).lua, name).toContain('local function remove_from_any_state(');
  });

  it('take their keys in the order their headers name them, each a key of the queue', () => {
    const queue = new RedisLayout('p').forType('some.type') as unknown as Record<string, unknown>;
    for (const name of scriptNames()) {
      const { lua, keys, variants } = loadLua(name);
      keys.forEach((key, i) => {
        expect(lua, name).toContain(`-- KEYS[${i + 1}] ${key}:`);
        if (key !== 'claimLog') expect(typeof queue[key], `${name}: KEYS[${i + 1}] ${key} is no field of TypeKeys`).toBe('string');
      });
      for (const variant of Object.values(variants)) for (const key of variant) expect(keys, name).toContain(key);
    }
    expect(loadLua('enqueue').variants.plain).toEqual(['meta', 'schedule', 'recent', 'slotGuard']);
  });

  it('refuses includes that form a cycle, and numbers its keys 1, 2, 3', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rde-lua-'));
    try {
      mkdirSync(join(dir, 'includes'));
      writeFileSync(join(dir, 'includes', 'a.lua'), '-- @include b\nlocal function a() return b() end\n');
      writeFileSync(join(dir, 'includes', 'b.lua'), '-- @include a\nlocal function b() return a() end\n');
      writeFileSync(join(dir, 'loop.lua'), '-- KEYS[1] meta: m\n-- @include a\nreturn a()\n');
      expect(() => expandScript(dir, 'loop')).toThrow(/cycle: a -> b -> a/);
      writeFileSync(join(dir, 'gap.lua'), '-- KEYS[1] meta: m\n-- KEYS[3] ready: r\nreturn 1\n');
      expect(() => expandScript(dir, 'gap')).toThrow(/KEYS\[3\] where KEYS\[2\] comes next/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function scriptNames(): string[] {
  return readdirSync(join(ROOT, 'lua'))
    .filter((file) => file.endsWith('.lua'))
    .map((file) => file.slice(0, -'.lua'.length));
}
