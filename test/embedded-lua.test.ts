import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GENERATED, ROOT, embedLua } from '../scripts/embed-lua.mjs';
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
    expect(loadLua('enqueue').lua).toContain(readFileSync(join(ROOT, 'lua', 'includes', `${include}.lua`), 'utf8'));
  });
});
