// Types of scripts/embed-lua.mjs, for test/embedded-lua.test.ts.
export declare const ROOT: string;
/** src/redis/lua-sources.generated.ts, relative to the root. */
export declare const GENERATED: string;
/** Lua text whose `-- @include` lines are replaced by lua/includes/ (each once, what they need first). */
export declare function expandLua(luaDir: string, source: string, from?: string): string;
export declare function expandScript(luaDir: string, name: string): { lua: string; numberOfKeys: number; keys: string[]; variants: Record<string, string[]>; commands: string[] };
/** The text of src/redis/lua-sources.generated.ts for the scripts under `root`/lua. */
export declare function embedLua(root?: string): string;
