import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

export interface ChartSeries {
  readonly label: string;
  readonly color: string;
  readonly values: ReadonlyArray<number | null>;
}

/** A uPlot chart over `times` (seconds), redrawn in place when the data change; `bars` draws columns (the due timeline). */
export function TimeChart(props: { title: string; times: readonly number[]; series: readonly ChartSeries[]; unit?: string; bars?: boolean; testId?: string }) {
  const host = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);
  const shape = `${props.bars ? 'bars' : 'lines'}:${props.series.map((s) => s.label).join(',')}`;

  useEffect(() => {
    const element = host.current;
    if (!element) return;
    const width = Math.max(280, element.clientWidth || 480);
    const options: uPlot.Options = {
      width,
      height: 180,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (_u, min, max) => [0, Math.max(1, max, min)] } },
      axes: [{ stroke: '#667' }, { stroke: '#667', label: props.unit ?? '', size: 56 }],
      series: [
        { label: 'time', value: (_u: uPlot, v: number | null) => (v == null ? '--' : new Date(v * 1_000).toLocaleTimeString()) },
        ...props.series.map((s) => ({
          label: s.label,
          stroke: s.color,
          fill: props.bars ? `${s.color}99` : undefined,
          width: props.bars ? 0 : 2,
          spanGaps: false,
          // Sparse data (a slot here and there) would draw no line at all without them.
          points: { show: !props.bars, size: 4 },
          ...(props.bars ? { paths: uPlot.paths.bars!({ size: [0.8, 40] }) } : {}),
        })),
      ],
    };
    chart.current = new uPlot(options, [[...props.times], ...props.series.map((s) => [...s.values])] as uPlot.AlignedData, element);
    showLatest(chart.current, props.times.length);
    const resize = () => chart.current?.setSize({ width: Math.max(280, element.clientWidth), height: 180 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      chart.current?.destroy();
      chart.current = null;
    };
  }, [shape]);

  useEffect(() => {
    chart.current?.setData([[...props.times], ...props.series.map((s) => [...s.values])] as uPlot.AlignedData);
    if (chart.current) showLatest(chart.current, props.times.length);
  }, [props.times, props.series]);

  return (
    <figure class="chart" data-testid={props.testId}>
      <figcaption>{props.title}</figcaption>
      <div ref={host} />
    </figure>
  );
}

/** The legend shows the latest point's values when the cursor is not over the chart, instead of '--'. */
function showLatest(chart: uPlot, points: number): void {
  if (points > 0 && chart.cursor.idx == null) chart.setLegend({ idx: points - 1 });
}
