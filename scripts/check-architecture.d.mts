// Types of scripts/check-architecture.mjs, for test/architecture.test.ts.
export declare const ROOT: string;
/** Every module of src/ (relative to the root) and the project modules it imports. */
export declare function importGraph(root?: string): Map<string, string[]>;
/** Each import cycle, as the modules along it. */
export declare function findCycles(graph: Map<string, string[]>): string[][];
/** Each Redis command a module of service, cli, dashboard or integrations sends itself. */
export declare function commandProblems(root?: string): string[];
/** Each import that crosses the layers the wrong way, said in a line. */
export declare function layeringProblems(graph: Map<string, string[]>, root?: string): string[];
/** The most lines a hand-written file of src/ or lua/ may have. */
export declare const MAX_LINES: number;
/** Each hand-written file of src/ and lua/ over MAX_LINES lines, said in a line. */
export declare function sizeProblems(root?: string): string[];
