import { type Overview, type StateCounts, api } from './api';
import { count } from './format';
import { usePolling } from './use-polling';

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
  const instances = usePolling(() => api.instances(), 'instances', 10_000);
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
  // Stuck work: a group with ready events that no live instance handles (all its instances stopped).
  const consumed = new Set((instances.value?.instances ?? []).flatMap((i) => i.handlers.map((h) => `${h.type}|${h.group}`)));
  const unconsumed = instances.value
    ? overview.types.flatMap((t) =>
        Object.entries(t.counts.groups && Object.keys(t.counts.groups).length > 0 ? t.counts.groups : { default: t.counts })
          .filter(([g, c]) => c.ready > 0 && !t.paused && !consumed.has(`${t.type}|${g}`))
          .map(([g, c]) => ({ type: t.type, group: g, ready: c.ready, waitedMs: c.oldestReadyMs ?? 0 })),
      )
    : [];
  const card = (label: string, value: number, extra?: string) => (
    <div class={extra ? `card ${extra}` : 'card'}>
      <span class="label">{label}</span>
      <span class="value">{count(value)}</span>
    </div>
  );
  return (
    <>
      {unconsumed.length > 0 && (
        <div class="error" data-testid="unconsumed">
          {unconsumed.map((u) => (
            <p key={`${u.type}|${u.group}`}>
              {count(u.ready)} ready event{u.ready === 1 ? '' : 's'} of {u.type}
              {u.group === 'default' ? '' : ` in group ${u.group}`}, the oldest waiting {Math.round(u.waitedMs / 1_000)} s, and no instance that handles them answered.
            </p>
          ))}
        </div>
      )}
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
