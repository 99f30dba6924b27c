import type { Overview, StateCounts } from './api';
import { count } from './format';

function Cells(props: { counts: StateCounts }) {
  const c = props.counts;
  return (
    <>
      <td class="num">{count(c.scheduled)}</td>
      <td class="num">{count(c.ready)}</td>
      <td class="num">{count(c.inFlight)}</td>
      <td class={c.dead > 0 ? 'num dead' : 'num'}>{count(c.dead)}</td>
    </>
  );
}

/** Totals, then every type under the prefix with its counts per state, and per group below it. */
export function OverviewPage(props: { overview: Overview | undefined }) {
  const overview = props.overview;
  if (!overview) return <p class="muted">Reading Redis…</p>;
  if (overview.types.length === 0) return <p class="muted">No event types under prefix '{overview.prefix}' yet.</p>;
  // A named group's states are its own: its dead letters count in the totals as the type's do (the default group's are the type's).
  const everyGroup = (t: (typeof overview.types)[number]) => [
    t.counts,
    ...Object.entries(t.counts.groups ?? {})
      .filter(([g]) => g !== 'default')
      .map(([, c]) => c),
  ];
  const total = overview.types
    .flatMap(everyGroup)
    .reduce((sum, c) => ({ scheduled: sum.scheduled + c.scheduled, ready: sum.ready + c.ready, inFlight: sum.inFlight + c.inFlight, dead: sum.dead + c.dead }), {
      scheduled: 0,
      ready: 0,
      inFlight: 0,
      dead: 0,
    });
  const schedules = overview.types.reduce((n, t) => n + (t.schedules ?? 0), 0);
  const paused = overview.types.filter((t) => t.paused).length;
  const card = (label: string, value: number, extra?: string) => (
    <div class={extra ? `card ${extra}` : 'card'}>
      <span class="label">{label}</span>
      <span class="value">{count(value)}</span>
    </div>
  );
  return (
    <>
      <div class="cards" data-testid="totals">
        {card('Types', overview.types.length)}
        {card('Scheduled', total.scheduled)}
        {card('Ready', total.ready)}
        {card('In flight', total.inFlight)}
        {card('Dead letters', total.dead, total.dead > 0 ? 'dead' : undefined)}
        {paused > 0 && card('Paused types', paused, 'paused')}
        {schedules > 0 && card('Recurring schedules', schedules)}
      </div>
      <table class="types" data-testid="types">
        <thead>
          <tr>
            <th>Type</th>
            <th class="num">Scheduled</th>
            <th class="num">Ready</th>
            <th class="num">In flight</th>
            <th class="num">Dead</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {overview.types.map((t) => (
            <>
              <tr key={t.type} data-type={t.type}>
                <td>
                  <a href={`#/types/${encodeURIComponent(t.type)}`}>{t.type}</a>
                  {t.partitions > 1 && <span class="muted"> · {t.partitions} partitions</span>}
                  {(t.schedules ?? 0) > 0 && (
                    <a class="muted" href="#/schedules">
                      {' '}
                      · {t.schedules} schedule{t.schedules === 1 ? '' : 's'}
                    </a>
                  )}
                </td>
                <Cells counts={t.counts} />
                <td>{t.paused && <span class="badge paused">paused</span>}</td>
              </tr>
              {Object.entries(t.counts.groups ?? {}).map(([group, counts]) => (
                <tr key={`${t.type}/${group}`} class="group-row" data-group={group}>
                  <td>
                    <a href={`#/types/${encodeURIComponent(t.type)}/scheduled?group=${encodeURIComponent(group)}`}>↳ group {group}</a>
                  </td>
                  <Cells counts={counts} />
                  <td />
                </tr>
              ))}
            </>
          ))}
        </tbody>
      </table>
    </>
  );
}
