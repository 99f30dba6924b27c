// Types of scripts/export-client-lua.mjs, for the tests.
export declare const CLIENT_SCRIPTS: string[];
export declare const WIRE_FORMAT_VERSION: number;
/** clients/python/reactive_delayed_events/lua, relative to the root. */
export declare const CLIENT_LUA_DIR: string;
/** File name -> content of every exported file, from lua/ under `root`. */
export declare function clientLuaFiles(root?: string): Record<string, string>;
/** The exported files that differ from lua/ (or are missing, or left over). */
export declare function staleClientLua(root?: string): string[];
