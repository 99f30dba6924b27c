/**
 * npm run bench [-- --quick]: our service, BullMQ and Bee-Queue through the same
 * workloads on one private redis-server, in one run. Writes benchmarks/RESULTS.md
 * and benchmarks/chart.svg.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RedisServer } from '../test/support/redis-server';
import type { BenchQueueFactory } from './adapters/bench-queue';
import { beeQueue } from './adapters/bee-queue';
import { bullmq } from './adapters/bullmq';
import { ours } from './adapters/ours';
import { type Row, median, renderChart, renderFloor, renderResults, renderTable } from './report';
import { roundTripFloorMicros } from './round-trip-floor';
import { type ScriptFloorRow, scriptFloorMicros } from './script-floor';
import { type AtScale, type EnqueueMode, atScale, commandsPerEvent, endToEnd, enqueueRate, lateness, memoryPerEvent, withQueue } from './scenarios';

const quick = process.argv.includes('--quick');
/** --scenarios=1,3 runs only those (for profiling); RESULTS.md is then not written. */
const onlyArg = process.argv.find((a) => a.startsWith('--scenarios='));
const selected = new Set((onlyArg?.split('=')[1] ?? '1,2,3,4,5,6').split(','));
const wanted = (n: number) => selected.has(String(n));
const repeats = quick ? 1 : 3;
const libraries: BenchQueueFactory[] = [ours, bullmq, beeQueue];
const log = (message: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${message}`);

/** CPU time counters from /proc/stat: on a shared VM, time stolen by the host skews every figure. */
function cpuTimes(): { total: number; steal: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return { total: fields.reduce((a, b) => a + b, 0), steal: fields[7] ?? 0 };
}

async function main(): Promise<void> {
  const cpuAtStart = cpuTimes();
  const server = await RedisServer.start();
  const startedAt = Date.now();
  const rows: Row[] = [];
  /**
   * `roundTripBound`: every operation waits for one round trip. The bare round trip is
   * measured next to each library's run, and an empty script and our scripts alone (script-floor.ts) next to ours.
   */
  const measure = async (
    row: Omit<Row, 'values' | 'floorMicros' | 'emptyScriptMicros' | 'ourScriptsMicros'> & { roundTripBound?: { script: ScriptFloorRow; count: number } },
    run: (factory: BenchQueueFactory) => Promise<number>,
    only = libraries,
  ) => {
    const { roundTripBound, ...described } = row;
    const values: Record<string, number[]> = {};
    const floorMicros: number[] = [];
    const emptyScript: number[] = [];
    const ourScripts: number[] = [];
    for (let r = 0; r < repeats; r++) {
      for (const factory of only) {
        if (roundTripBound) {
          floorMicros.push(await roundTripFloorMicros(server.port));
          if (factory === ours) {
            const floor = await scriptFloorMicros(server.port, roundTripBound.script, roundTripBound.count);
            emptyScript.push(floor.emptyScript);
            ourScripts.push(floor.ourScripts);
          }
        }
        const value = await run(factory);
        (values[factory.library] ??= []).push(value);
        log(`${row.scenario} / ${row.metric} / ${factory.library}: ${value.toFixed(2)} ${row.unit}`);
      }
    }
    rows.push(roundTripBound ? { ...described, values, floorMicros, emptyScriptMicros: emptyScript, ourScriptsMicros: ourScripts } : { ...described, values });
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
          targetRatio: 1.2,
          targetAbsolute: mode.startsWith('bulk') ? 200_000 : undefined,
          ...(mode === 'one at a time' ? { roundTripBound: { script: 'one enqueue at a time' as const, count: 20_000 } } : {}),
        },
        (f) => withQueue(f, server.port, (q) => enqueueRate(q, mode, 20_000)),
      );
    }
    if (wanted(2)) await measure(
      { scenario: '2. memory per pending event', metric: '100,000 events', unit: 'bytes', higherIsBetter: false, targetRatio: 2 },
      (f) => withQueue(f, server.port, (q, redis) => memoryPerEvent(q, redis, 100_000)),
    );
    if (wanted(3)) await measure(
      { scenario: '3. end-to-end, all due', metric: '20,000 at parallelism 32', unit: 'events/s', higherIsBetter: true, targetRatio: 2.5 },
      (f) => withQueue(f, server.port, (q) => endToEnd(q, 20_000, 32)),
    );
    if (wanted(3)) await measure(
      { scenario: '3. end-to-end, all due', metric: '5,000 at parallelism 1', unit: 'events/s', higherIsBetter: true, targetRatio: 2, roundTripBound: { script: 'claims at parallelism 1', count: 5_000 } },
      (f) => withQueue(f, server.port, (q) => endToEnd(q, 5_000, 1)),
    );
    for (const [rate, count] of wanted(4) ? ([[200, quick ? 600 : 2_000], [5_000, 5_000]] as const) : []) {
      const results: Record<string, Array<{ p50: number; p99: number; max: number }>> = {};
      for (let r = 0; r < repeats; r++) {
        for (const f of libraries) {
          const l = await withQueue(f, server.port, (q) => lateness(q, count, rate));
          (results[f.library] ??= []).push(l);
          log(`4. lateness at ${rate}/s / ${f.library}: p50 ${l.p50} p99 ${l.p99} max ${l.max} ms`);
        }
      }
      for (const key of ['p50', 'p99', 'max'] as const) {
        rows.push({
          scenario: `4. lateness, ${count.toLocaleString('en')} events at ${rate.toLocaleString('en')}/s`,
          metric: key,
          unit: 'ms',
          higherIsBetter: false,
          targetAbsolute: rate === 200 ? { p50: undefined, p99: 5, max: 20 }[key] : undefined,
          values: Object.fromEntries(Object.entries(results).map(([lib, list]) => [lib, list.map((l) => l[key])])),
        });
      }
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
      for (const [key, metric] of [['enqueue', 'enqueue, 64 in flight'], ['endToEnd', 'end-to-end, 2,000 due at parallelism 32']] as const) {
        rows.push({ scenario: '5. backlog of 5,000,000 against 10,000', metric, unit: '× of 10,000', higherIsBetter: true, targetAbsolute: 0.8, values: { ours: against(key, largest.settled) } });
        rows.push({ scenario: '5. backlog of 5,000,000 against 10,000', metric: `${metric}, first round after the fill`, unit: '× of 10,000', higherIsBetter: true, values: { ours: against(key, [largest.afterFill]) } });
      }
    }
    if (wanted(6)) await measure(
      { scenario: '6. Redis commands per handled event', metric: '5,000 events, enqueue to success', unit: 'commands', higherIsBetter: false },
      (f) => withQueue(f, server.port, (q, redis) => commandsPerEvent(q, redis, 5_000)),
    );
  } finally {
    await server.stop();
  }
  const minutes = (Date.now() - startedAt) / 60_000;
  const cpuAtEnd = cpuTimes();
  const stealPercent = (100 * (cpuAtEnd.steal - cpuAtStart.steal)) / Math.max(1, cpuAtEnd.total - cpuAtStart.total);
  const versions = Object.fromEntries(['bullmq', 'bee-queue', 'ioredis'].map((name) => [name, (require(`${name}/package.json`) as { version: string }).version]));
  if (onlyArg) {
    console.log(renderTable(rows));
    console.log(renderFloor(rows));
    return;
  }
  writeFileSync(join(__dirname, 'RESULTS.md'), renderResults(rows, { quick, repeats, minutes, versions, stealPercent }));
  writeFileSync(join(__dirname, 'chart.svg'), renderChart(rows));
  log(`wrote benchmarks/RESULTS.md and benchmarks/chart.svg (${minutes.toFixed(1)} min, CPU steal ${stealPercent.toFixed(0)}%)`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
