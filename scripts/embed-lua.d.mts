// Types of scripts/embed-lua.mjs, for the tests and the tests' global setup.
export declare const ROOT: string;
/** src/redis/lua-sources.generated.ts, relative to the root. */
export declare const GENERATED: string;
/** A script's arguments and reply, as its header declares them (scripts/lua-contract.mjs). */
export interface LuaContract {
  scalars: Array<{ name: string; type: 'number' | 'string' | 'flag' }>;
  lists: Array<{ name: string; fields?: Array<{ name: string; type: string }>; single?: string }>;
  reply: { single?: string; fields?: Array<{ name: string; optional: boolean; type: string }> };
}
/** Lua text whose `-- @include` lines are replaced by lua/includes/ (each once, what they need first). */
export declare function expandLua(luaDir: string, source: string, from?: string): string;
export declare function expandScript(
  luaDir: string,
  name: string,
): { lua: string; numberOfKeys: number; keys: string[]; variants: Record<string, string[]>; commands: string[]; contract: LuaContract };
/** The text of src/redis/lua-sources.generated.ts for the scripts under `root`/lua. */
export declare function embedLua(root?: string): string;
/** Writes src/redis/lua-sources.generated.ts when it differs from what lua/ gives; true when it wrote. */
export declare function ensureEmbeddedLua(root?: string): boolean;
/** Writes each assembled script to `dir`/<name>.lua; resolves their names. */
export declare function writeAssembledScripts(dir: string, root?: string): string[];
