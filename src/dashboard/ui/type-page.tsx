import { useMemo, useState } from 'preact/hooks';
import { type EventState, type InspectedEvent, STATES, type TypeOverview, api } from './api';
import { type ChartSeries, TimeChart } from './charts';
import { CleanupPanel } from './cleanup-panel';
import { useConfirm } from './confirm';
import { STATE_LABEL, absolute, count, readableSpec, relative, schedulePolicy } from './format';
import { usePolling } from './use-polling';

const PAGE = 50;
const HORIZONS = ['15m', '1h', '6h', '24h'] as const;

function Charts(props: { type: string }) {
  const [window, setWindow] = useState('15m');
  const activity = usePolling(() => api.activity(props.type, window), `${props.type}/${window}`, 10_000);
  // The slot under way is partial (its counts still growing): drawn, it would look like a drop to 0 at the end of every series.
  const slots = useMemo(() => {
    const all = activity.value?.slots ?? [];
    const last = all[all.length - 1];
    return last && Date.now() - new Date(last.at).getTime() < 10_000 ? all.slice(0, -1) : all;
  }, [activity.value]);
  const times = useMemo(() => slots.map((s) => new Date(s.at).getTime() / 1_000), [slots]);
  const flow: ChartSeries[] = useMemo(
    () => [
      { label: 'enqueued', color: '#3b82f6', values: slots.map((s) => s.enqueued) },
      { label: 'handled', color: '#16a34a', values: slots.map((s) => s.handled) },
      { label: 'failed', color: '#f59e0b', values: slots.map((s) => s.failed) },
      { label: 'dead-lettered', color: '#dc2626', values: slots.map((s) => s.deadLettered) },
    ],
    [slots],
  );
  const lateness: ChartSeries[] = useMemo(
    () => [
      { label: 'p50', color: '#6366f1', values: slots.map((s) => s.latenessP50Ms ?? null) },
      { label: 'p99', color: '#db2777', values: slots.map((s) => s.latenessP99Ms ?? null) },
    ],
    [slots],
  );
  return (
    <section class="panel">
      <header class="panel-head">
        <h2>Activity, all instances</h2>
        <select aria-label="Chart window" value={window} onChange={(e) => setWindow((e.target as HTMLSelectElement).value)}>
          <option value="15m">last 15 min</option>
          <option value="1h">last hour</option>
        </select>
      </header>
      {activity.error && <p class="error">{activity.error}</p>}
      <div class="charts">
        <TimeChart title="Events per 10 s" times={times} series={flow} unit="events" testId="activity-chart" />
        <TimeChart title="Lateness (due to claim)" times={times} series={lateness} unit="ms" testId="lateness-chart" />
      </div>
    </section>
  );
}

function Timeline(props: { type: string; group?: string }) {
  const [horizon, setHorizon] = useState<(typeof HORIZONS)[number]>('1h');
  const timeline = usePolling(() => api.timeline(props.type, horizon, props.group), `${props.type}/${horizon}/${props.group ?? ''}`, 10_000);
  const slots = timeline.value?.slots ?? [];
  const times = useMemo(() => slots.map((s) => new Date(s.from).getTime() / 1_000), [slots]);
  const series = useMemo(() => [{ label: 'falling due', color: '#0ea5e9', values: slots.map((s) => s.count) }], [slots]);
  const total = slots.reduce((n, s) => n + s.count, 0);
  return (
    <section class="panel">
      <header class="panel-head">
        <h2>Falling due</h2>
        <div class="segmented" role="group" aria-label="Timeline horizon">
          {HORIZONS.map((h) => (
            <button type="button" class={h === horizon ? 'active' : ''} onClick={() => setHorizon(h)}>
              next {h}
            </button>
          ))}
        </div>
      </header>
      <p class="muted" data-testid="timeline-summary">
        {count(total)} due in the next {horizon}
        {timeline.value && timeline.value.overdue > 0 ? `, ${count(timeline.value.overdue)} overdue` : ''}
        {timeline.value?.partial ? ' (more than a million: the last slots count too few)' : ''}
      </p>
      <TimeChart title="Events falling due" times={times} series={series} unit="events" bars testId="timeline-chart" />
    </section>
  );
}

function EventRow(props: { type: string; event: InspectedEvent; selectable: boolean; selected: boolean; onSelect: (on: boolean) => void }) {
  const e = props.event;
  const when = e.state === 'dead' ? e.deadLetteredAt : e.state === 'in-flight' ? e.leaseExpiresAt : e.state === 'handled' ? e.handledAt : e.dueAt;
  return (
    <tr data-id={e.id}>
      {props.selectable && (
        <td>
          <input type="checkbox" aria-label={`select ${e.id}`} checked={props.selected} onChange={(ev) => props.onSelect((ev.target as HTMLInputElement).checked)} />
        </td>
      )}
      <td class="id">
        <a href={`#/types/${encodeURIComponent(props.type)}/events/${encodeURIComponent(e.id)}`}>{e.id}</a>
      </td>
      <td title={absolute(when)}>{relative(when)}</td>
      <td class="num">{e.attempt}</td>
      <td class="error-cell">{e.decodeError ?? e.lastError ?? ''}</td>
    </tr>
  );
}

/** The flow limits the shown group enforces, and their use now; nothing when it has none. */
function Limits(props: { type: string; group: string | undefined }) {
  const limits = usePolling(() => api.limits(props.type), props.type, 5_000);
  const use = limits.value?.limits[props.group ?? 'default'];
  if (!use) return null;
  const parts: string[] = [];
  if (use.rate)
    parts.push(`at most ${count(use.rate.max)} calls per ${use.rate.perMs >= 1_000 ? `${use.rate.perMs / 1_000} s` : `${use.rate.perMs} ms`} (${count(use.started ?? 0)} in the window now)`);
  if (use.concurrency !== undefined) parts.push(`at most ${count(use.concurrency)} at once (${count(use.running)} running)`);
  if (use.perKey) {
    const each = [
      ...(use.perKey.rate ? [`${count(use.perKey.rate.max)} calls per ${use.perKey.rate.perMs >= 1_000 ? `${use.perKey.rate.perMs / 1_000} s` : `${use.perKey.rate.perMs} ms`}`] : []),
      ...(use.perKey.concurrency !== undefined ? [`${count(use.perKey.concurrency)} at once`] : []),
    ];
    parts.push(`shared out per key${each.length > 0 ? `, each at most ${each.join(' and ')}` : ''} (${count(use.keysWaiting ?? 0)} keys waiting)`);
  }
  if (use.heldForMs !== undefined) parts.push(`held by a handler for ${Math.ceil(use.heldForMs / 1_000)} s more`);
  return (
    <>
      <p class="muted" data-testid="limits">
        Flow limits across the fleet: {parts.join('; ')}
      </p>
      {use.keys && use.keys.length > 0 && (
        <p class="muted" data-testid="limit-keys">
          Busiest keys: {use.keys.map((k) => `${k.key} (${count(k.waiting)} waiting, ${count(k.running)} running)`).join('; ')}
        </p>
      )}
    </>
  );
}

export function TypePage(props: { info: TypeOverview | undefined; type: string; state: EventState; group: string | undefined; readOnly: boolean }) {
  const { type, state, group } = props;
  const confirm = useConfirm();
  const [offset, setOffset] = useState(0);
  const [search, setSearch] = useState('');
  const [searched, setSearched] = useState<string | undefined>(undefined);
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  const [message, setMessage] = useState<string | undefined>(undefined);
  const page = usePolling(
    () => (searched ? api.search(type, searched) : api.events(type, state, { offset, limit: PAGE, group })),
    `${type}/${state}/${group ?? ''}/${offset}/${searched ?? ''}`,
    3_000,
  );
  const schedules = usePolling(() => api.schedules(type), type, 15_000);
  const counts = group ? props.info?.counts.groups?.[group] : props.info?.counts;
  const events = page.value?.events ?? [];
  const dead = state === 'dead' && !searched;

  const act = async (run: () => Promise<unknown>, done: string) => {
    try {
      await run();
      setMessage(done);
      setSelected(new Set());
      page.refresh();
    } catch (e) {
      setMessage(e instanceof Error ? e.message : String(e));
    }
  };
  const base = `#/types/${encodeURIComponent(type)}`;
  const groupQuery = group ? `?group=${encodeURIComponent(group)}` : '';

  const deadAction = async (verb: 'replay' | 'purge', all: boolean) => {
    const ids = [...selected];
    const what = all ? `all ${count(counts?.dead ?? 0)} dead letters` : `${ids.length} dead letter${ids.length === 1 ? '' : 's'}`;
    const question = verb === 'replay' ? `Replay ${what}? They are scheduled again with fresh attempts.` : `Purge ${what}? They are deleted for good.`;
    if (!(await confirm(verb === 'replay' ? 'Replay dead letters' : 'Purge dead letters', question, verb === 'replay' ? 'Replay' : 'Purge', verb === 'purge'))) return;
    const selection = all ? ({ all: true } as const) : { ids };
    await act(async () => {
      // The group this page shows, named: without one the server acts in every group of the type.
      const { count: n } = await (verb === 'replay' ? api.replay(type, selection, group ?? 'default') : api.purge(type, selection, group ?? 'default'));
      setMessage(`${verb === 'replay' ? 'Replayed' : 'Purged'} ${count(n)}`);
    }, '');
  };

  return (
    <div class="type-page">
      <header class="type-head">
        <h1>
          {type}
          {group && <span class="muted"> · group {group}</span>}
          {props.info?.paused && <span class="badge paused">paused</span>}
        </h1>
        {(props.info?.groups.length ?? 0) > 0 && (
          <label class="group-select">
            Group{' '}
            <select
              aria-label="Subscriber group"
              data-testid="group-select"
              value={group ?? 'default'}
              onChange={(e) => {
                const chosen = (e.target as HTMLSelectElement).value;
                location.hash = `${base}/${state}${chosen === 'default' ? '' : `?group=${encodeURIComponent(chosen)}`}`;
              }}
            >
              {/* The default group first, listed even when no handler joined it: its keys are the type's own. */}
              {['default', ...props.info!.groups.filter((g) => g !== 'default')].map((g) => (
                <option value={g}>
                  {g}
                  {(props.info!.counts.groups?.[g]?.dead ?? 0) > 0 ? ` (${count(props.info!.counts.groups![g]!.dead)} dead)` : ''}
                </option>
              ))}
            </select>
          </label>
        )}
        <span class="spacer" />
        {!props.readOnly && props.info && (
          <button
            type="button"
            data-testid="pause-toggle"
            onClick={async () => {
              const pausing = !props.info!.paused;
              const ok = await confirm(
                pausing ? `Pause ${type}?` : `Resume ${type}?`,
                pausing ? 'No instance dispatches or claims its events until it is resumed; enqueues still store.' : 'Every instance dispatches and claims its events again.',
                pausing ? 'Pause' : 'Resume',
                pausing,
              );
              if (ok) await act(() => (pausing ? api.pause(type) : api.resume(type)), pausing ? 'Paused' : 'Resumed');
            }}
          >
            {props.info.paused ? 'Resume' : 'Pause'}
          </button>
        )}
      </header>
      {message && (
        <p class="notice" role="status">
          {message}
        </p>
      )}
      <Limits type={type} group={group} />
      <Charts type={type} />
      <Timeline type={type} group={group} />
      <section class="panel">
        <nav class="tabs" aria-label="Event states">
          {STATES.map((s) => (
            <a class={s === state && !searched ? 'active' : ''} href={`${base}/${s}${groupQuery}`} onClick={() => (setOffset(0), setSearched(undefined), setSelected(new Set()))}>
              {STATE_LABEL[s]} {s !== 'handled' && <span class="count">{count((counts ? counts[s === 'in-flight' ? 'inFlight' : s] : 0) ?? 0)}</span>}
            </a>
          ))}
          <form
            class="search"
            onSubmit={(e) => {
              e.preventDefault();
              setSearched(search.trim() || undefined);
            }}
          >
            <input type="search" placeholder="Find by id" aria-label="Find by id" value={search} onInput={(e) => setSearch((e.target as HTMLInputElement).value)} />
            <button type="submit">Find</button>
          </form>
        </nav>
        {searched && (
          <p class="muted">
            Event {searched}: {events.length === 0 ? 'not stored' : 'found'} ·{' '}
            <button type="button" class="link" onClick={() => (setSearched(undefined), setSearch(''))}>
              back to the list
            </button>
          </p>
        )}
        {dead && !props.readOnly && (
          <div class="bulk">
            <button type="button" disabled={selected.size === 0} data-testid="replay-selected" onClick={() => deadAction('replay', false)}>
              Replay selected
            </button>
            <button type="button" disabled={selected.size === 0} class="danger" onClick={() => deadAction('purge', false)}>
              Purge selected
            </button>
            <button type="button" disabled={(counts?.dead ?? 0) === 0} onClick={() => deadAction('replay', true)}>
              Replay all
            </button>
            <button type="button" disabled={(counts?.dead ?? 0) === 0} class="danger" onClick={() => deadAction('purge', true)}>
              Purge all
            </button>
          </div>
        )}
        {page.error && <p class="error">{page.error}</p>}
        <table class="events" data-testid="events">
          <thead>
            <tr>
              {dead && !props.readOnly && <th />}
              <th>Id</th>
              <th>{state === 'dead' ? 'Dead-lettered' : state === 'in-flight' ? 'Lease expires' : state === 'handled' ? 'Handled' : 'Due'}</th>
              <th class="num">Attempt</th>
              <th>Last error</th>
            </tr>
          </thead>
          <tbody>
            {events.map((e) => (
              <EventRow
                key={e.id}
                type={type}
                event={e}
                selectable={dead && !props.readOnly}
                selected={selected.has(e.id)}
                onSelect={(on) => {
                  const next = new Set(selected);
                  if (on) next.add(e.id);
                  else next.delete(e.id);
                  setSelected(next);
                }}
              />
            ))}
          </tbody>
        </table>
        {events.length === 0 && page.value && <p class="muted">Nothing {searched ? 'found' : `${STATE_LABEL[state]!.toLowerCase()}`}.</p>}
        {!searched && (
          <div class="pager">
            <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
              ← Previous
            </button>
            <span class="muted">{events.length > 0 ? `${count(offset + 1)}–${count(offset + events.length)}` : ''}</span>
            <button type="button" disabled={events.length < PAGE} onClick={() => setOffset(offset + PAGE)}>
              Next →
            </button>
          </div>
        )}
      </section>
      {(schedules.value?.schedules.length ?? 0) > 0 && (
        <section class="panel">
          <h2>Recurring schedules</h2>
          <table class="events">
            <thead>
              <tr>
                <th>Name</th>
                <th>When</th>
                <th>Next</th>
                <th>Last</th>
                <th>Catch-up</th>
                <th>Policy</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {schedules.value!.schedules.map((s) => (
                <tr key={s.name}>
                  <td>{s.name}</td>
                  <td>{readableSpec(s.spec)}</td>
                  <td title={absolute(s.next)}>{s.paused ? 'paused' : s.next ? relative(s.next) : 'ended'}</td>
                  <td title={absolute(s.last)}>{s.last ? relative(s.last) : '–'}</td>
                  <td>{s.catchUp}</td>
                  <td>{schedulePolicy(s)}</td>
                  <td>
                    {!props.readOnly && (
                      <button
                        type="button"
                        class="danger"
                        onClick={async () => {
                          if (await confirm(`Remove schedule ${s.name}?`, 'No further occurrences are enqueued; those already stored stay.', 'Remove'))
                            await act(() => api.unschedule(type, s.name), `Removed schedule ${s.name}`);
                        }}
                      >
                        Remove
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      {!props.readOnly && <CleanupPanel type={type} group={group} onMessage={setMessage} onChanged={() => page.refresh()} />}
    </div>
  );
}
