/**
 * npm run bench [-- --quick] [--reps=N] [--scenarios=1,3] [--out=FILE]: our
 * service, BullMQ and Bee-Queue through the same workloads on one private
 * redis-server, in one run. Writes benchmarks/RESULTS.md and benchmarks/chart.svg
 * (with --out, FILE and a chart beside it).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { Redis } from 'ioredis';
import { RedisServer } from '../test/support/redis-server';
import type { BenchQueueFactory } from './adapters/bench-queue';
import { beeQueue } from './adapters/bee-queue';
import { bullmq } from './adapters/bullmq';
import { ours, oursWith } from './adapters/ours';
import { type Row, median, renderChart, renderFloor, renderResults, renderTable, renderTargets } from './report';
import { roundTripFloorMicros } from './round-trip-floor';
import { type ScriptFloorRow, scriptFloorMicros } from './script-floor';
import { fanOutEndToEnd, fanOutMemory } from './fan-out';
import { inspectionLatency } from './inspection';
import {
  type AtScale,
  type EnqueueMode,
  type HandlingCost,
  type Lateness,
  atScale,
  burstLateness,
  commandsPerEvent,
  endToEnd,
  endToEndCost,
  enqueueRate,
  lateness,
  memoryPerEvent,
  withQueue,
} from './scenarios';

const usage = 'usage: tsx benchmarks/run.ts [--quick] [--reps=N] [--scenarios=1,3,...] [--out=FILE]';
for (const a of process.argv.slice(2)) {
  if (a !== '--quick' && !/^--(reps|scenarios|out)=./.test(a)) throw new Error(`unknown argument ${a}; ${usage}`);
}
const quick = process.argv.includes('--quick');
const argument = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
/** --scenarios=1,3 runs only those (for profiling); RESULTS.md is then not written unless --out says where. */
const onlyArg = argument('scenarios');
const selected = new Set((onlyArg ?? '1,2,3,4,5,6,7,8').split(','));
for (const n of selected) if (!/^[1-8]$/.test(n)) throw new Error(`--scenarios takes numbers from 1 to 8, got ${n}; ${usage}`);
const wanted = (n: number) => selected.has(String(n));
/** Repetitions of every comparative row, the libraries back to back within each. */
const repeats = Number(argument('reps') ?? (quick ? 1 : 5));
if (!Number.isInteger(repeats) || repeats < 1) throw new Error(`--reps takes a whole number >= 1, got ${argument('reps')}`);
/** Where RESULTS.md goes (chart.svg beside it). */
const out = argument('out') ?? (onlyArg ? undefined : join(__dirname, 'RESULTS.md'));
const libraries: BenchQueueFactory[] = [ours, bullmq, beeQueue];
const log = (message: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${message}`);

/** The CPU as /proc/cpuinfo names it, and whether it runs under a hypervisor (its `hypervisor` flag). */
function cpuModel(): { model: string; virtual: boolean } {
  let info = '';
  try {
    info = readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    // not Linux: os.cpus() below
  }
  const model = /^model name\s*:\s*(.+)$/m.exec(info)?.[1]?.trim() ?? cpus()[0]?.model.trim() ?? 'an unknown CPU';
  return { model, virtual: /^flags\s*:.*\bhypervisor\b/m.test(info) };
}

/** CPU time counters from /proc/stat: on a shared VM, time stolen by the host skews every figure. */
function cpuTimes(): { total: number; steal: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return { total: fields.reduce((a, b) => a + b, 0), steal: fields[7] ?? 0 };
}

async function main(): Promise<void> {
  const cpuAtStart = cpuTimes();
  const server = await RedisServer.start();
  const redisVersion = await (async () => {
    const client = new Redis(server.port, '127.0.0.1');
    try {
      return /redis_version:(\S+)/.exec(await client.info('server'))?.[1] ?? '?';
    } finally {
      client.disconnect();
    }
  })();
  const startedAt = Date.now();
  const rows: Row[] = [];
  /**
   * `roundTripBound`: every operation waits for one round trip. The bare round trip is
   * measured next to each library's run, and an empty script and our scripts alone (script-floor.ts) next to ours.
   */
  const measure = async (
    row: Omit<Row, 'values' | 'floorMicros' | 'emptyScriptMicros' | 'ourScriptsMicros' | 'flatSchedule'> & { roundTripBound?: { script: ScriptFloorRow; count: number } },
    run: (factory: BenchQueueFactory) => Promise<number>,
    only = libraries,
  ) => {
    const { roundTripBound, ...described } = row;
    const values: Record<string, number[]> = {};
    const floorMicros: number[] = [];
    const emptyScript: number[] = [];
    const ourScripts: number[] = [];
    const flatSchedule = { micros: [] as number[], bytes: [] as number[], ourBytes: [] as number[] };
    for (let r = 0; r < repeats; r++) {
      for (const factory of only) {
        if (roundTripBound) {
          floorMicros.push(await roundTripFloorMicros(server.port));
          if (factory === ours) {
            const floor = await scriptFloorMicros(server.port, roundTripBound.script, roundTripBound.count);
            emptyScript.push(floor.emptyScript);
            ourScripts.push(floor.ourScripts);
            if (floor.flatSchedule) {
              flatSchedule.micros.push(floor.flatSchedule.micros);
              flatSchedule.bytes.push(floor.flatSchedule.bytes);
              flatSchedule.ourBytes.push(floor.flatSchedule.ourBytes);
            }
          }
        }
        const value = await run(factory);
        (values[factory.library] ??= []).push(value);
        log(`${row.scenario} / ${row.metric} / ${factory.library}: ${value.toFixed(2)} ${row.unit}`);
      }
    }
    const flat = flatSchedule.micros.length > 0 ? { flatSchedule } : {};
    rows.push(roundTripBound ? { ...described, values, floorMicros, emptyScriptMicros: emptyScript, ourScriptsMicros: ourScripts, ...flat } : { ...described, values });
  };
  /** One run per library and repetition giving several figures, each a row of its own. */
  const measureMany = async <K extends string>(described: Record<K, Omit<Row, 'values'>>, run: (factory: BenchQueueFactory) => Promise<Record<K, number>>, only = libraries) => {
    const values = new Map<K, Record<string, number[]>>((Object.keys(described) as K[]).map((k) => [k, {}]));
    for (let r = 0; r < repeats; r++) {
      for (const factory of only) {
        const figures = await run(factory);
        for (const [key, byLibrary] of values) (byLibrary[factory.library] ??= []).push(figures[key]);
        log(
          `${Object.values<Omit<Row, 'values'>>(described)[0]!.scenario} / ${factory.library}: ${JSON.stringify(Object.fromEntries(Object.entries<number>(figures).map(([k, v]) => [k, +v.toFixed(2)])))}`,
        );
      }
    }
    for (const [key, byLibrary] of values) rows.push({ ...described[key], values: byLibrary });
  };
  const latenessRows = (scenario: string, results: Record<string, Lateness[]>, targets: Partial<Record<keyof Lateness, number>>) => {
    for (const key of ['p50', 'p99', 'max'] as const) {
      rows.push({
        scenario,
        metric: key,
        unit: 'ms',
        higherIsBetter: false,
        targetAbsolute: targets[key],
        values: Object.fromEntries(Object.entries(results).map(([lib, list]) => [lib, list.map((l) => l[key])])),
      });
    }
  };
  try {
    const modes: EnqueueMode[] = ['one at a time', '64 in flight', 'bulk 1,000 per call'];
    for (const mode of wanted(1) ? modes : []) {
      await measure(
        {
          scenario: '1. enqueue 20,000 delayed',
          metric: mode,
          unit: 'events/s',
          higherIsBetter: true,
          // The target is on one at a time (beside its floors); the other modes answer to "no row below 1.0×".
          ...(mode === 'one at a time' ? { targetRatio: 1, roundTripBound: { script: 'one enqueue at a time' as const, count: 20_000 } } : {}),
        },
        (f) => withQueue(f, server.port, (q) => enqueueRate(q, mode, 20_000)),
      );
    }
    if (wanted(2))
      await measure({ scenario: '2. memory per pending event', metric: '100,000 events', unit: 'bytes', higherIsBetter: false, targetRatio: 2 }, (f) =>
        withQueue(f, server.port, (q, redis) => memoryPerEvent(q, redis, 100_000)),
      );
    if (wanted(3)) {
      const scenario = '3. end-to-end, all due, 20,000 at parallelism 32';
      // Beside the three libraries, in the same repetitions: ours without the idempotency marks
      // (idempotencyWindowMs, on by default), to show what they cost of the handling.
      const unmarked = oursWith({ idempotencyWindowMs: 0 }, 'ours, idempotencyWindowMs: 0');
      // ... and ours claiming only for free handler slots (prefetch 0), to show what claiming ahead gives.
      const unprefetched = oursWith({}, 'ours, prefetch: 0', { prefetch: 0 });
      await measureMany<keyof HandlingCost>(
        {
          rate: { scenario, metric: 'handled per second', unit: 'events/s', higherIsBetter: true, targetRatio: 3.5 },
          redisCpuMicros: { scenario, metric: 'Redis CPU per handled event', unit: 'µs', higherIsBetter: false, targetRatio: 5 },
          nodeCpuMicros: { scenario, metric: 'Node CPU per handled event', unit: 'µs', higherIsBetter: false },
          commands: { scenario, metric: 'Redis commands per handled event', unit: 'commands', higherIsBetter: false },
        },
        (f) => withQueue(f, server.port, (q, redis) => endToEndCost(q, redis, 20_000, 32)),
        [...libraries, unmarked, unprefetched],
      );
      for (const metric of ['handled per second', 'Redis CPU per handled event', 'Node CPU per handled event', 'Redis commands per handled event']) {
        const at = rows.findIndex((r) => r.scenario === scenario && r.metric === metric);
        const { [unprefetched.library]: alone = [], ...values } = rows[at]!.values;
        rows[at] = { ...rows[at]!, values };
        rows.push({ scenario, metric: `${metric}, prefetch: 0`, unit: rows[at]!.unit, higherIsBetter: rows[at]!.higherIsBetter, values: { ours: alone } });
      }
      for (const metric of ['handled per second', 'Redis CPU per handled event']) {
        const at = rows.findIndex((r) => r.scenario === scenario && r.metric === metric);
        const { [unmarked.library]: without = [], ...values } = rows[at]!.values;
        const peers = ['bullmq', 'bee-queue'].map((lib) => median(values[lib] ?? [Infinity]));
        const note =
          metric === 'handled per second'
            ? `with the idempotency marks off (\`idempotencyWindowMs: 0\`, same repetitions): ${Math.round(median(without)).toLocaleString('en')} events/s, ${(median(without) / Math.max(...peers)).toFixed(2)}× the better peer`
            : `the state changes alone, with the idempotency marks off: ${median(without).toFixed(2)} µs; the target needs ≤ ${(Math.min(...peers) / 5).toFixed(2)} µs. The marks (on by default: a re-sent enqueue, or a recurring occurrence enqueued by a second instance, of an event handled within idempotencyWindowMs is a duplicate) are the difference`;
        rows[at] = { ...rows[at]!, values, floorNote: note };
        rows.push({ scenario, metric: `${metric}, idempotencyWindowMs: 0`, unit: rows[at]!.unit, higherIsBetter: rows[at]!.higherIsBetter, values: { ours: without } });
      }
    }
    if (wanted(3)) {
      const unprefetched = oursWith({}, 'ours, prefetch: 0', { prefetch: 0 });
      await measure(
        {
          scenario: '3. end-to-end, all due',
          metric: '5,000 at parallelism 1',
          unit: 'events/s',
          higherIsBetter: true,
          targetRatio: 10,
          roundTripBound: { script: 'claims at parallelism 1', count: 5_000 },
        },
        (f) => withQueue(f, server.port, (q) => endToEnd(q, 5_000, 1)),
        [...libraries, unprefetched],
      );
      const at = rows.length - 1;
      const { [unprefetched.library]: alone = [], ...values } = rows[at]!.values;
      rows[at] = { ...rows[at]!, values };
      rows.push({ scenario: '3. end-to-end, all due', metric: '5,000 at parallelism 1, prefetch: 0', unit: 'events/s', higherIsBetter: true, values: { ours: alone } });
    }
    for (const [rate, count] of wanted(4)
      ? ([
          [200, quick ? 600 : 2_000],
          [5_000, 5_000],
        ] as const)
      : []) {
      const results: Record<string, Array<{ p50: number; p99: number; max: number }>> = {};
      for (let r = 0; r < repeats; r++) {
        for (const f of libraries) {
          const l = await withQueue(f, server.port, (q) => lateness(q, count, rate));
          (results[f.library] ??= []).push(l);
          log(`4. lateness at ${rate}/s / ${f.library}: p50 ${l.p50} p99 ${l.p99} max ${l.max} ms`);
        }
      }
      latenessRows(`4. lateness, ${count.toLocaleString('en')} events at ${rate.toLocaleString('en')}/s`, results, rate === 200 ? { p99: 5, max: 20 } : {});
    }
    if (wanted(4)) {
      const results: Record<string, Lateness[]> = {};
      const stored: Record<string, number[]> = {};
      for (let r = 0; r < repeats; r++) {
        for (const f of libraries) {
          const l = await withQueue(f, server.port, (q) => burstLateness(q, 2_000));
          (results[f.library] ??= []).push(l);
          (stored[f.library] ??= []).push(l.storedMs);
          log(`4. burst lateness / ${f.library}: p50 ${l.p50} p99 ${l.p99} max ${l.max} ms, all added in ${l.storedMs.toFixed(1)} ms`);
        }
      }
      const scenario = '4. burst lateness, 2,000 events due in 1–40 ms, added at once, parallelism 64';
      latenessRows(scenario, results, { p99: 10 });
      rows.push({ scenario, metric: 'until every add was confirmed', unit: 'ms', higherIsBetter: false, values: stored });
      const p99 = rows.find((r) => r.scenario === scenario && r.metric === 'p99')!;
      const storedCell = (lib: string) => (stored[lib]?.length ? median(stored[lib]!).toFixed(0) : '–');
      rows[rows.indexOf(p99)] = {
        ...p99,
        floorNote: `every add of the burst was confirmed after ${storedCell('ours')} ms (Bee-Queue ${storedCell('bee-queue')}, BullMQ ${storedCell('bullmq')}): an event due 1 ms after its add call is late by at least that, in any library`,
      };
    }
    const ourScale = new Map<number, { settled: AtScale[]; afterFill: AtScale }>();
    for (const backlog of !wanted(5) ? [] : quick ? [10_000, 1_000_000] : [10_000, 1_000_000, 5_000_000]) {
      // The peers at 5,000,000 would take most of the time budget to fill; the promise is about ours.
      const only = backlog > 1_000_000 ? [ours] : libraries;
      const results: Record<string, AtScale[]> = {};
      for (const f of only) {
        const { settled, afterFill } = await withQueue(f, server.port, (q, redis) => atScale(q, redis, backlog, repeats));
        results[f.library] = settled;
        if (f === ours) ourScale.set(backlog, { settled, afterFill });
        const describe = (s: AtScale) => `enqueue ${s.enqueue.toFixed(0)}/s, end-to-end ${s.endToEnd.toFixed(0)}/s, used_memory ${(s.memory / 1e6).toFixed(0)} MB`;
        log(`5. backlog ${backlog} / ${f.library}, first round after the fill: ${describe(afterFill)}`);
        for (const s of settled) log(`5. backlog ${backlog} / ${f.library}: ${describe(s)}`);
      }
      const pick = (key: 'enqueue' | 'endToEnd' | 'memory', scale = 1) => Object.fromEntries(Object.entries(results).map(([lib, list]) => [lib, list.map((s) => s[key] / scale)]));
      const scenario = `5. backlog of ${backlog.toLocaleString('en')} pending`;
      rows.push({ scenario, metric: 'enqueue, 64 in flight', unit: 'events/s', higherIsBetter: true, values: pick('enqueue') });
      rows.push({ scenario, metric: 'end-to-end, 2,000 due at parallelism 32', unit: 'events/s', higherIsBetter: true, values: pick('endToEnd') });
      rows.push({ scenario, metric: 'Redis used_memory', unit: 'MB', higherIsBetter: false, values: pick('memory', 1e6) });
    }
    // The promise of scenario 5: an operation costs no more with the largest backlog (within 20%).
    // The first round after the fill is shown beside it: what the growth itself costs, once.
    const [smallest, largest] = [ourScale.get(10_000), ourScale.get(5_000_000)];
    if (smallest && largest) {
      const against = (key: 'enqueue' | 'endToEnd', rounds: readonly AtScale[]) => rounds.map((s) => s[key] / median(smallest.settled.map((t) => t[key])));
      for (const [key, metric] of [
        ['enqueue', 'enqueue, 64 in flight'],
        ['endToEnd', 'end-to-end, 2,000 due at parallelism 32'],
      ] as const) {
        rows.push({ scenario: '5. backlog of 5,000,000 against 10,000', metric, unit: '× of 10,000', higherIsBetter: true, targetAbsolute: 0.8, values: { ours: against(key, largest.settled) } });
        rows.push({
          scenario: '5. backlog of 5,000,000 against 10,000',
          metric: `${metric}, first round after the fill`,
          unit: '× of 10,000',
          higherIsBetter: true,
          values: { ours: against(key, [largest.afterFill]) },
        });
      }
    }
    if (wanted(6))
      await measure({ scenario: '6. Redis commands per handled event', metric: '5,000 events, enqueue to success', unit: 'commands', higherIsBetter: false }, (f) =>
        withQueue(f, server.port, (q, redis) => commandsPerEvent(q, redis, 5_000)),
      );
    if (wanted(7)) {
      // No peer has fan-out: these rows are ours alone, the default group as the baseline (benchmarks/fan-out.ts).
      const scenario = '7. fan-out (ours only: no peer has subscriber groups)';
      const values = { one: [] as number[], five: [] as number[], three: [] as number[] };
      for (let r = 0; r < Math.min(repeats, 3); r++) {
        values.one.push((await fanOutMemory(server.port, 1, `f1r${r}`)).scheduled);
        values.five.push((await fanOutMemory(server.port, 5, `f5r${r}`)).scheduled);
        values.three.push(await fanOutEndToEnd(server.port, 3, `f3r${r}`));
        log(`7. fan-out, repetition ${r + 1}: ${values.one.at(-1)!.toFixed(0)} / ${values.five.at(-1)!.toFixed(0)} B, ${values.three.at(-1)!.toFixed(0)} deliveries/s`);
      }
      rows.push({ scenario, metric: 'memory per pending event, 1 group', unit: 'bytes', higherIsBetter: false, values: { ours: values.one } });
      rows.push({ scenario, metric: 'memory per pending event, 5 groups', unit: 'bytes', higherIsBetter: false, values: { ours: values.five } });
      rows.push({ scenario, metric: 'end-to-end, 20,000 due, 3 groups at parallelism 32 each', unit: 'deliveries/s', higherIsBetter: true, values: { ours: values.three } });
    }
    if (wanted(8)) {
      const events = quick ? 100_000 : 1_000_000;
      const { rows: timings, fillSeconds } = await inspectionLatency(server.port, events, 'inspect');
      log(`8. inspection at ${events} pending: filled in ${fillSeconds.toFixed(1)} s`);
      for (const [call, t] of timings) {
        if (call.includes('types()')) continue; // a SCAN of the keyspace: a tool's call, not a per-type one
        rows.push({
          scenario: `8. inspection with ${events.toLocaleString('en')} pending (ours only)`,
          metric: `${call.replace(/`/g, '')}, median of 20`,
          unit: 'ms',
          higherIsBetter: false,
          values: { ours: [t.median] },
        });
      }
    }
  } finally {
    await server.stop();
  }
  const minutes = (Date.now() - startedAt) / 60_000;
  const cpuAtEnd = cpuTimes();
  const stealPercent = (100 * (cpuAtEnd.steal - cpuAtStart.steal)) / Math.max(1, cpuAtEnd.total - cpuAtStart.total);
  const versions = {
    ours: (require('../package.json') as { version: string }).version,
    ...Object.fromEntries(['bullmq', 'bee-queue', 'ioredis'].map((name) => [name, (require(`${name}/package.json`) as { version: string }).version])),
  };
  if (!out) {
    console.log(renderTargets(rows));
    console.log();
    console.log(renderTable(rows));
    console.log(renderFloor(rows));
    return;
  }
  const cpu = cpuModel();
  const machine = `${cpu.model}, ${cpus().length} cores${cpu.virtual ? ' (a virtual machine)' : ''}, Node ${process.version}, Redis ${redisVersion}`;
  writeFileSync(out, renderResults(rows, { quick, repeats, minutes, versions, stealPercent, machine }));
  writeFileSync(join(dirname(out), 'chart.svg'), renderChart(rows));
  log(`wrote ${out} and chart.svg beside it (${minutes.toFixed(1)} min, CPU steal ${stealPercent.toFixed(1)}%)`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
