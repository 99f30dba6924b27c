export interface Row {
  readonly scenario: string;
  readonly metric: string;
  readonly unit: string;
  readonly higherIsBetter: boolean;
  /** Our advantage over the better peer must be at least this (×). */
  readonly targetRatio?: number;
  /** Our median must be at least (higher is better) or at most (lower is better) this. */
  readonly targetAbsolute?: number;
  /** Per library, one value per repetition. */
  readonly values: Readonly<Record<string, number[]>>;
  /**
   * For rows where every operation waits for one round trip (events/s rows):
   * µs per bare round trip, measured next to each library's run (round-trip-floor.ts).
   */
  readonly floorMicros?: readonly number[];
  /** For the same rows, next to our run: µs per awaited ioredis call of a script that only returns (script-floor.ts). */
  readonly emptyScriptMicros?: readonly number[];
  /** Likewise, of our own Lua script for the operation, with none of the service around it. */
  readonly ourScriptsMicros?: readonly number[];
  /** One enqueue at a time: the same script with a flat schedule (script-floor.ts), µs per call, and bytes per pending event of it and of ours. */
  readonly flatSchedule?: { readonly micros: readonly number[]; readonly bytes: readonly number[]; readonly ourBytes: readonly number[] };
  /** What limits the row, as measured in this run, shown beside a missed target. */
  readonly floorNote?: string;
}

const PEERS = ['bullmq', 'bee-queue'] as const;

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function format(value: number): string {
  if (Math.abs(value) >= 1_000) return Math.round(value).toLocaleString('en');
  if (Math.abs(value) >= 10) return value.toFixed(0);
  return value.toFixed(2);
}

function cell(values: readonly number[] | undefined): string {
  if (!values || values.length === 0) return '–';
  const m = format(median(values));
  return values.length === 1 ? m : `${m} (${format(Math.min(...values))}–${format(Math.max(...values))})`;
}

function ratio(row: Row, ours: number, peers: readonly number[]): number {
  const best = row.higherIsBetter ? Math.max(...peers) : Math.min(...peers);
  if (row.higherIsBetter) return ours / best;
  return ours === 0 ? Infinity : best / ours;
}

/**
 * Our advantage over the better peer in each repetition (> 1: ours is better,
 * whichever way the metric points): the libraries of one repetition ran back to
 * back, so a ratio within it is steadier than a ratio of medians when the
 * machine's speed drifts between repetitions. Rows whose libraries ran a
 * different number of times fall back to the ratio of medians.
 */
export function ratios(row: Row): number[] | undefined {
  const ours = row.values.ours;
  const peers = PEERS.map((p) => row.values[p]).filter((v): v is number[] => !!v && v.length > 0);
  if (!ours || ours.length === 0 || peers.length === 0) return undefined;
  if (peers.every((p) => p.length === ours.length))
    return ours.map((o, r) =>
      ratio(
        row,
        o,
        peers.map((p) => p[r]!),
      ),
    );
  return [ratio(row, median(ours), peers.map(median))];
}

/** The median of the per-repetition ratios. */
export function advantage(row: Row): number | undefined {
  const all = ratios(row);
  return all && median(all);
}

function ratioCell(row: Row): string {
  const all = ratios(row);
  if (!all) return '–';
  const x = (v: number) => (v === Infinity ? '∞' : v.toFixed(2));
  const m = `${x(median(all))}×`;
  return all.length === 1 ? m : `${m} (${x(Math.min(...all))}–${x(Math.max(...all))})`;
}

function verdict(row: Row): string {
  const checks: boolean[] = [];
  const a = advantage(row);
  if (row.targetRatio !== undefined && a !== undefined) checks.push(a >= row.targetRatio);
  if (row.targetAbsolute !== undefined && row.values.ours) {
    const o = median(row.values.ours);
    checks.push(row.higherIsBetter ? o >= row.targetAbsolute : o <= row.targetAbsolute);
  }
  if (checks.length === 0) return '';
  return checks.every(Boolean) ? 'met' : '**missed**';
}

/** In the ratio's own direction (above 1: ours better), and for a lower-is-better row also as a share of the peer's figure. */
function target(row: Row): string {
  const parts: string[] = [];
  if (row.targetRatio !== undefined) {
    const share = !row.higherIsBetter && row.targetRatio !== 1 ? ` (ours ≤ ${(1 / row.targetRatio).toFixed(2)}× its ${row.unit})` : '';
    parts.push(`≥ ${row.targetRatio}× the better peer${share}`);
  }
  if (row.targetAbsolute !== undefined) parts.push(`${row.higherIsBetter ? '≥' : '≤'} ${format(row.targetAbsolute)} ${row.unit}`);
  return parts.join(', ');
}

export function renderTable(rows: readonly Row[]): string {
  const lines = ['| scenario | measure | unit | ours | BullMQ | Bee-Queue | ours vs better peer | target | |', '|---|---|---|---|---|---|---|---|---|'];
  for (const row of rows) {
    lines.push(
      `| ${row.scenario} | ${row.metric} | ${row.unit} | ${cell(row.values.ours)} | ${cell(row.values.bullmq)} | ${cell(row.values['bee-queue'])} | ${ratioCell(row)} | ${target(row)} | ${verdict(row)} |`,
    );
  }
  return lines.join('\n');
}

/**
 * Every target of the benchmark (issue #22, raised by #46), found among the rows by scenario
 * number and measure: one the run did not measure (a quick run, --scenarios)
 * is listed as such rather than left out.
 */
const TARGETS: ReadonlyArray<{ readonly scenario: string; readonly metric: string; readonly target: string }> = [
  { scenario: '1. ', metric: 'one at a time', target: 'one enqueue at a time ≥ 1.0× the better peer' },
  { scenario: '2. ', metric: '100,000 events', target: "memory per pending event ≤ 0.5× the better peer's bytes" },
  { scenario: '3. end-to-end, all due, 20,000 at parallelism 32', metric: 'handled per second', target: 'end-to-end at parallelism 32 ≥ 3.5× the better peer' },
  { scenario: '3. end-to-end, all due', metric: '5,000 at parallelism 1', target: 'end-to-end at parallelism 1 ≥ 10× the better peer' },
  { scenario: '3. end-to-end, all due, 20,000 at parallelism 32', metric: 'Redis CPU per handled event', target: "Redis CPU per handled event ≤ 0.2× the better peer's" },
  { scenario: '4. lateness, ', metric: 'p99', target: 'lateness at 200/s: p99 ≤ 5 ms' },
  { scenario: '4. lateness, ', metric: 'max', target: 'lateness at 200/s: max ≤ 20 ms' },
  { scenario: '4. burst lateness', metric: 'p99', target: 'burst lateness: p99 ≤ 10 ms' },
  { scenario: '5. backlog of 5,000,000 against 10,000', metric: 'enqueue, 64 in flight', target: 'backlog of 5,000,000 against 10,000: enqueue (64 in flight) within 20%' },
  { scenario: '5. backlog of 5,000,000 against 10,000', metric: 'end-to-end, 2,000 due at parallelism 32', target: 'backlog of 5,000,000 against 10,000: end-to-end within 20%' },
];

/**
 * The targets first: each with what this run measured, met or missed, and for
 * a missed one bound by a round trip per operation, the floors measured beside it.
 */
export function renderTargets(rows: readonly Row[]): string {
  const lines = ['| target | measured | | floor beside it |', '|---|---|---|---|'];
  const behind = rows.filter((r) => (advantage(r) ?? Infinity) < 1);
  lines.push(
    `| no row below 1.0× the better peer | ${behind.length === 0 ? 'none below' : behind.map((r) => `${r.scenario}, ${r.metric}: ${ratioCell(r)}`).join('; ')} | ${behind.length === 0 ? 'met' : '**missed**'} | |`,
  );
  for (const row of rows.filter((r) => verdict(r) !== '')) {
    const measured: string[] = [];
    if (row.targetRatio !== undefined) measured.push(ratioCell(row));
    if (row.targetAbsolute !== undefined && row.values.ours) measured.push(`${format(median(row.values.ours))} ${row.unit}`);
    const missed = verdict(row) !== 'met';
    let floor = missed ? (row.floorNote ?? '') : '';
    if (missed && row.floorMicros?.length) {
      const perOp = (values: readonly number[] | undefined) => (values && values.length > 0 ? format(1e6 / median(values)) : '–');
      const peer = Math.min(...PEERS.map((p) => (row.values[p]?.length ? 1e6 / median(row.values[p]!) : Infinity)));
      floor = `better peer ${format(peer)} µs per operation; ours ${perOp(row.values.ours)}; an empty script through ioredis ${cell(row.emptyScriptMicros)}, our script alone ${cell(row.ourScriptsMicros)}, a bare round trip ${cell(row.floorMicros)}`;
      const flat = row.flatSchedule;
      if (flat?.micros.length) {
        // The trade that would reach it: memory per pending event is a target too (≤ 0.5× the better peer).
        const memory = rows.find((r) => r.scenario.startsWith('2. '));
        const peerBytes = memory ? Math.min(...PEERS.map((p) => (memory.values[p]?.length ? median(memory.values[p]!) : Infinity))) : undefined;
        floor +=
          `. The same script with a flat schedule (one sorted set, as the peers keep theirs) instead of buckets: ${cell(flat.micros)} µs, ` +
          `but ${format(median(flat.bytes))} B of Redis memory per pending event against our ${format(median(flat.ourBytes))} B in the same loops` +
          (peerBytes !== undefined && Number.isFinite(peerBytes) ? ` (the memory target allows ${format(peerBytes / 2)} B)` : '');
      }
    }
    lines.push(`| ${row.scenario}, ${row.metric}: ${target(row)} | ${measured.join(', ')} | ${verdict(row)} | ${floor} |`);
  }
  for (const t of TARGETS) {
    const found = rows.some((r) => r.scenario.startsWith(t.scenario) && r.metric === t.metric && verdict(r) !== '');
    if (!found) lines.push(`| ${t.target} | not measured in this run | | |`);
  }
  return lines.join('\n');
}

export interface RunDescription {
  readonly quick: boolean;
  readonly repeats: number;
  readonly minutes: number;
  /** Package versions: `ours` (this service), bullmq, bee-queue, ioredis. */
  readonly versions: Record<string, string>;
  readonly stealPercent: number;
  /** CPU model, cores, Node and Redis versions. */
  readonly machine: string;
}

export function renderResults(rows: readonly Row[], run: RunDescription): string {
  return `# Benchmark results

Written by \`npm run bench${run.quick ? ' -- --quick' : ''}\`${run.repeats !== (run.quick ? 1 : 5) ? ` with \`--reps=${run.repeats}\`` : ''} on ${new Date().toISOString().slice(0, 10)}.${run.quick ? ' A quick run (smaller lateness, backlog and inspection sizes): a check of the harness, not figures to quote.' : ''}

- **Machine**: ${run.machine}. One private \`redis-server\` (default settings, no persistence) on the same machine as Node.
- **Libraries**: reactive-delayed-events ${run.versions.ours} (ours), BullMQ ${run.versions.bullmq}, Bee-Queue ${run.versions['bee-queue']}; ioredis ${run.versions.ioredis}. Every library runs the same workload with the payload \`{ n, s: 'x'.repeat(20) }\` and an async no-op handler.
- **Run**: ${run.repeats === 1 ? 'one pass' : `${run.repeats} repetitions, the libraries back to back within each; each figure is the median (min–max in brackets)`}. It took ${run.minutes.toFixed(1)} minutes; the host stole ${run.stealPercent.toFixed(1)}% of this machine's CPU time meanwhile (above a few percent, figures swing between runs: compare within one run).
- **Ratios**: "ours vs better peer" is our figure against the better of the two peers within each repetition, reported as the median of those per-repetition ratios (their min–max in brackets); above 1 means ours is better, for lower-is-better measures too.

How each scenario is measured: [README.md](README.md).

## Targets

${renderTargets(rows)}

## Every row

${renderTable(rows)}
${renderFloor(rows)}
![lateness and throughput](chart.svg)
`;
}

/**
 * What one round trip per operation allows, per row bound by it: a target that
 * needs less time per operation than a bare round trip takes cannot be met by
 * any client or script that waits for Redis once per operation; one below an
 * empty script's call, by no design that runs a script per operation through
 * ioredis; one below our scripts alone, by no change to the service's own code.
 */
export function renderFloor(rows: readonly Row[]): string {
  const bound = rows.filter((r) => r.floorMicros && r.floorMicros.length > 0 && r.higherIsBetter && r.targetRatio !== undefined);
  if (bound.length === 0) return '';
  const lines = [
    '',
    '### The round-trip floor',
    '',
    'In these rows every operation waits for one round trip: an awaited enqueue must be confirmed by Redis, and at',
    'parallelism 1 the next event can only be claimed once the handler has given its slot back. "Bare round trip" is',
    "an awaited `PING` over a plain socket, no client library, measured next to each library's run (median, min–max):",
    'no client and no script can take less per operation. On a VM it moves between runs with where the scheduler',
    'places Node and Redis, so compare a row only with the floor measured next to it. Next to our run, two bare',
    'loops of awaited ioredis calls (`script-floor.ts`): "empty script" returns at once but gets the arguments our',
    'script gets, the least any design that runs one script per',
    'operation costs with this client; "our scripts alone" is our own Lua script for the operation with none of the',
    'service around it, the least the service can take without changing its scripts or its client library.',
    '"Left" is what the target leaves per operation beyond each of these floors: beyond the bare round trip for',
    "the client, the script and the handler; beyond the empty script for the script's work and the service; beyond",
    'our scripts alone for the service\'s own code. "Best possible" is the better peer\'s time divided by the bare',
    'round trip.',
    '',
    '| scenario | measure | bare round trip, µs | empty script, µs | our scripts alone, µs | ours, µs per op | better peer, µs per op | target, µs per op | left: round trip, µs | left: empty script, µs | left: our scripts, µs | best possible |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  const leftCell = (left: number, below: string) => (left < 0 ? `**${format(left)}: below ${below}**` : format(left));
  for (const row of bound) {
    const floor = median(row.floorMicros!);
    const perOp = (values: readonly number[] | undefined) => (values && values.length > 0 ? 1e6 / median(values) : undefined);
    const ours = perOp(row.values.ours);
    const peer = Math.min(...PEERS.map((p) => perOp(row.values[p]) ?? Infinity));
    const needed = peer / row.targetRatio!;
    const beyond = (values: readonly number[] | undefined, what: string) => (values && values.length > 0 ? leftCell(needed - median(values), what) : '–');
    lines.push(
      `| ${row.scenario} | ${row.metric} | ${cell(row.floorMicros)} | ${cell(row.emptyScriptMicros)} | ${cell(row.ourScriptsMicros)} | ${ours === undefined ? '–' : format(ours)} | ${format(peer)} | ${format(needed)} (${row.targetRatio}×) | ${beyond(row.floorMicros, 'one bare round trip')} | ${beyond(row.emptyScriptMicros, 'an empty script')} | ${beyond(row.ourScriptsMicros, 'our scripts alone')} | ${(peer / floor).toFixed(2)}× |`,
    );
  }
  return lines.join('\n') + '\n';
}

/** Bar chart: one group per compared throughput or lateness row (p99 and max), bars scaled to the group's largest value. */
export function renderChart(rows: readonly Row[]): string {
  const compared = (r: Row) => PEERS.some((p) => (r.values[p]?.length ?? 0) > 0);
  const shown = rows.filter((r) => compared(r) && ((r.unit === 'events/s' && !r.scenario.startsWith('5.')) || (r.unit === 'ms' && (r.metric === 'p99' || r.metric === 'max'))));
  const libraries = ['ours', ...PEERS];
  const colors: Record<string, string> = { ours: '#2b7a3d', bullmq: '#c0392b', 'bee-queue': '#d4a017' };
  const barHeight = 14;
  const groupHeight = libraries.length * barHeight + 26;
  const labelWidth = 330;
  const barWidth = 420;
  const width = labelWidth + barWidth + 120;
  const height = shown.length * groupHeight + 50;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="20" font-size="14" font-weight="bold">Throughput (events/s, longer is better) and lateness (ms, shorter is better), medians</text>`,
  ];
  shown.forEach((row, g) => {
    const top = 40 + g * groupHeight;
    parts.push(`<text x="10" y="${top + 12}" font-weight="bold">${escapeXml(`${row.scenario}: ${row.metric}`)} (${row.unit})</text>`);
    const medians = libraries.map((lib) => (row.values[lib]?.length ? median(row.values[lib]!) : undefined));
    const max = Math.max(1e-9, ...medians.filter((m): m is number => m !== undefined));
    libraries.forEach((lib, i) => {
      const m = medians[i];
      const y = top + 18 + i * barHeight;
      parts.push(`<text x="${labelWidth - 8}" y="${y + 11}" text-anchor="end">${lib}</text>`);
      if (m === undefined) return;
      const w = Math.max(1, (m / max) * barWidth);
      parts.push(`<rect x="${labelWidth}" y="${y + 1}" width="${w.toFixed(1)}" height="${barHeight - 3}" fill="${colors[lib]}"/>`);
      parts.push(`<text x="${labelWidth + w + 6}" y="${y + 11}">${format(m)}</text>`);
    });
  });
  parts.push('</svg>');
  return parts.join('\n');
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
