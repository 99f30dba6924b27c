/**
 * The built package (dist/, `npm run build`), as an application loads it: the
 * side-by-side benchmarks measure it, as they measure the peers' published
 * code. Through tsx the sources would run with esbuild's keepNames, which the
 * build leaves out (scripts/build.mjs): every closure made would define its
 * name, 4-5 % of an awaited enqueue's time.
 */
import type * as Package from '../src';

// require, not import: the path is dist/'s CommonJS entry, typed by the sources it is built from.
export const built = require('../dist/cjs/index.cjs') as typeof Package;
