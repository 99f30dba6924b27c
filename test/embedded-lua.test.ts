import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GENERATED, ROOT, embedLua, expandScript } from '../scripts/embed-lua.mjs';
import { RedisLayout } from '../src/redis/redis-layout';
import { loadLua } from '../src/redis/lua-scripts';
import { LUA_SOURCES } from '../src/redis/lua-sources.generated';

/**
 * The service runs the scripts compiled into src/redis/lua-sources.generated.ts,
 * never lua/ itself. That module is built, never committed (`npm install`,
 * npm test, typecheck, build and the tests' global setup write it), so it must
 * come out the same each time from the same lua/.
 */
describe('the embedded Lua scripts', () => {
  it('are built from lua/ alone: the same bytes every time, and the module the tests run is that build', () => {
    const once = embedLua(ROOT);
    expect(embedLua(ROOT)).toBe(once);
    expect(readFileSync(join(ROOT, GENERATED), 'utf8')).toBe(once);
    expect(readFileSync(join(ROOT, '.gitignore'), 'utf8').split('\n')).toContain(GENERATED);
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

  it('refuses includes that form a cycle, keys out of order, and a shorter key set that is not the first keys', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rde-lua-'));
    try {
      mkdirSync(join(dir, 'includes'));
      writeFileSync(join(dir, 'includes', 'a.lua'), '-- @include b\nlocal function a() return b() end\n');
      writeFileSync(join(dir, 'includes', 'b.lua'), '-- @include a\nlocal function b() return a() end\n');
      writeFileSync(join(dir, 'loop.lua'), '-- KEYS[1] meta: m\n-- REPLY (number): n\n-- @include a\nreturn a()\n');
      expect(() => expandScript(dir, 'loop')).toThrow(/cycle: a -> b -> a/);
      writeFileSync(join(dir, 'gap.lua'), '-- KEYS[1] meta: m\n-- KEYS[3] ready: r\n-- REPLY (number): n\nreturn 1\n');
      expect(() => expandScript(dir, 'gap')).toThrow(/KEYS\[3\] where KEYS\[2\] comes next/);
      writeFileSync(join(dir, 'variant.lua'), '-- KEYS[1] meta: m\n-- KEYS[2] ready: r\n-- KEYS(short) ready\n-- REPLY (number): n\nreturn 1\n');
      expect(() => expandScript(dir, 'variant')).toThrow(/KEYS\(short\) must be its first 1 KEYS/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('take their arguments by the names their headers declare: no position by hand, no local hiding one, a reply declared', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rde-lua-'));
    const script = (name: string, text: string) => {
      writeFileSync(join(dir, `${name}.lua`), `-- KEYS[1] meta: m\n${text}`);
      return () => expandScript(dir, name);
    };
    try {
      mkdirSync(join(dir, 'includes'));
      expect(script('positional', '-- ARGV[1] id (string): i\n-- REPLY (number): n\nreturn ARGV[1]\n')).toThrow(/reads ARGV by position \(return ARGV\[1\]\)/);
      expect(script('counted', '-- ARGV[1..] ids (string[]): i\n-- REPLY (number): n\nreturn #ARGV == 2\n')).toThrow(/reads ARGV by position/);
      expect(script('hidden', '-- ARGV[1] id (string): i\n-- REPLY (number): n\nlocal id = 1\nreturn id\n')).toThrow(/declares a local 'id', the name of one of its arguments/);
      expect(script('order', '-- ARGV[2] id (string): i\n-- REPLY (number): n\nreturn 1\n')).toThrow(/ARGV\[2\] where ARGV\[1\] comes next/);
      expect(script('after', '-- ARGV[1..] ids (string[]): i\n-- ARGV[2] id (string): i\n-- REPLY (number): n\nreturn 1\n')).toThrow(/comes after a list; scalars go first/);
      expect(script('untyped', '-- ARGV[1] id: i\n-- REPLY (number): n\nreturn 1\n')).toThrow(/declares no argument/);
      expect(script('silent', '-- ARGV[1] id (string): i\nreturn 1\n')).toThrow(/declares no reply/);
      expect(script('prose', '-- ARGV[1] id (string): i\n-- Returns 1\nreturn 1\n')).toThrow(/is no reply declaration/);
      const { lua, contract } = script(
        'named',
        '-- ARGV[1] most (number): m\n-- ARGV[2] on (flag): f\n-- ARGV[3..] first {id: string, claim: number}: a\n-- ARGV[..] rest (string[]): b\n-- REPLY {n: number, ok: flag}: r\nreturn {most, first_n}\n',
      )();
      expect(contract.scalars.map((s: { name: string }) => s.name)).toEqual(['most', 'on']);
      expect(lua).toContain("local most, on = tonumber(ARGV[1]), ARGV[2] == '1'");
      expect(lua).toContain('local first_n = tonumber(ARGV[3])');
      expect(lua).toContain('local rest_at = first_at + 2 * first_n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('read the flow hash by field name: each FLOW_<FIELD> is the place of its field in FLOW_FIELDS, and no script reads it by number', () => {
    const source = readFileSync(join(ROOT, 'lua', 'includes', 'limit-keys.lua'), 'utf8');
    const fields = JSON.parse(`[${/local FLOW_FIELDS = \{ (.*) \}/.exec(source)![1]!.replace(/'/g, '"')}]`) as string[];
    const places = new Map<string, number>();
    for (const m of source.matchAll(/^local (FLOW_[A-Z_, ]+) = ([\d, ]+)$/gm)) {
      const names = m[1]!.split(',').map((n) => n.trim());
      const values = m[2]!.split(',').map((v) => Number(v.trim()));
      names.forEach((name, i) => places.set(name, values[i]!));
    }
    expect([...places.keys()].sort()).toEqual(fields.map((f) => `FLOW_${f.toUpperCase()}`).sort());
    for (const [name, place] of places) expect(fields[place - 1], name).toBe(name.slice('FLOW_'.length).toLowerCase());
    for (const name of scriptNames()) expect(loadLua(name).lua.replace(/--.*$/gm, ''), name).not.toMatch(/flow\[\d/);
  });

  it('are each named in docs/state-machine.md, with the states they change', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'state-machine.md'), 'utf8');
    const unnamed = scriptNames().filter((name) => !doc.includes(`| \`${name}.lua\` |`));
    expect(unnamed, 'scripts missing from the table "Every script" of docs/state-machine.md').toEqual([]);
  });

  it('encode arguments as their headers place them, and decode replies by name', () => {
    const claim = LUA_SOURCES['complete-and-claim'];
    const encoded = claim.encode({
      most: 3,
      leaseMs: 30_000,
      maxAttempts: 5,
      windowMs: 0,
      token: 't',
      startNow: 1,
      keepCount: 0,
      keepAge: 0,
      maxVersion: 2,
      sortsByKey: true,
      agingMs: 60_000,
      heartbeatLeaseMs: 0,
      outcomesMaxLen: 0,
      started: [{ id: 's', claim: 7 }],
      confirmations: [],
      successes: [
        { id: 'a', claim: 1 },
        { id: 'b', claim: 2 },
      ],
      results: [{ id: 'b', result: '{"ok":1}' }],
    });
    // Thirteen scalars, then each list but the last with its length in front.
    expect(encoded).toEqual([3, 30_000, 5, 0, 't', 1, 0, 0, 2, '1', 60_000, 0, 0, 1, 's', 7, 0, 2, 'a', 1, 'b', 2, 'b', '{"ok":1}']);
    expect(claim.decode([1, [2], [], [], 1, '9', 0, -1, 0, []])).toEqual({
      now: 1,
      stale: [2],
      claimed: [],
      dead: [],
      paused: true,
      claimScore: '9',
      left: 0,
      throttledMs: -1,
      freed: 0,
      refused: [],
    });
    // A caller that passes what the header does not declare fails the type check (npm test runs it on this file).
    // @ts-expect-error: complete-and-claim declares `most`, not `count`
    expect(() => claim.encode({ count: 3 })).toThrow();
    // @ts-expect-error: dispatch-due's reply has no field `moved`
    expect(LUA_SOURCES['dispatch-due'].decode([1, 2, 3, 4, '', 0]).moved).toBeUndefined();
  });
});

function scriptNames(): string[] {
  return readdirSync(join(ROOT, 'lua'))
    .filter((file) => file.endsWith('.lua'))
    .map((file) => file.slice(0, -'.lua'.length));
}
