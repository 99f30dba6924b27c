import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { type EventState, type Overview, STATES } from './api';
import { ConfirmProvider } from './confirm';
import { EventPage } from './event-page';
import { InstancesPage } from './instances-page';
import { OverviewPage } from './overview-page';
import { SchedulesPage } from './schedules-page';
import { TypePage } from './type-page';

type Route = { page: 'overview' } | { page: 'schedules' } | { page: 'instances' } | { page: 'type'; type: string; state: EventState; group?: string } | { page: 'event'; type: string; id: string };

/** `#/`, `#/types/<type>[/<state>][?group=g]`, `#/types/<type>/events/<id>`: the hash keeps routing in the page, whatever path it is mounted under. */
function parseRoute(hash: string): Route {
  const [path = '', query = ''] = hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const group = new URLSearchParams(query).get('group') ?? undefined;
  if (parts[0] === 'schedules') return { page: 'schedules' };
  if (parts[0] === 'instances') return { page: 'instances' };
  if (parts[0] === 'types' && parts[1]) {
    if (parts[2] === 'events' && parts[3]) return { page: 'event', type: parts[1], id: parts.slice(3).join('/') };
    const state = STATES.includes(parts[2] as EventState) ? (parts[2] as EventState) : 'scheduled';
    return { page: 'type', type: parts[1], state, group };
  }
  return { page: 'overview' };
}

/** The overview as the server pushes it (server-sent events); EventSource reconnects by itself. */
function useLiveOverview(): { overview: Overview | undefined; connected: boolean; error: string | undefined } {
  const [overview, setOverview] = useState<Overview | undefined>(undefined);
  const [connected, setConnected] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  useEffect(() => {
    const source = new EventSource('api/live');
    source.addEventListener('overview', (message) => {
      const data = JSON.parse((message as MessageEvent<string>).data) as Overview | { error: string };
      if ('error' in data) setError(data.error);
      else {
        setOverview(data);
        setError(undefined);
      }
      setConnected(true);
    });
    source.onerror = () => setConnected(false);
    return () => source.close();
  }, []);
  return { overview, connected, error };
}

function App() {
  const [route, setRoute] = useState<Route>(parseRoute(location.hash));
  const { overview, connected, error } = useLiveOverview();
  useEffect(() => {
    const onHash = () => setRoute(parseRoute(location.hash));
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
  const readOnly = overview?.readOnly ?? true;
  const info = route.page === 'type' || route.page === 'event' ? overview?.types.find((t) => t.type === route.type) : undefined;
  // Connected to this server is not Redis answering: the badge says which (an error pushed in the overview means Redis is down).
  const state = !connected ? 'offline' : error ? 'Redis down' : 'live';
  return (
    <ConfirmProvider>
      <header class="top">
        <a class="brand" href="#/">
          Delayed events
        </a>
        {overview && <span class="muted">prefix '{overview.prefix}'</span>}
        {overview?.readOnly && <span class="badge">read-only</span>}
        <nav class="top-nav">
          <a href="#/">Types</a>
          <a href="#/schedules">Schedules</a>
          <a href="#/instances">Instances</a>
        </nav>
        <span
          class={state === 'live' ? 'live on' : state === 'Redis down' ? 'live down' : 'live'}
          data-testid="live"
          title={state === 'live' ? 'Updating live' : state === 'Redis down' ? 'Redis does not answer' : 'Reconnecting…'}
        >
          {state}
        </span>
      </header>
      <main>
        {error && <p class="error">Redis: {error}</p>}
        {route.page === 'overview' && <OverviewPage overview={overview} />}
        {route.page === 'schedules' && <SchedulesPage readOnly={readOnly} />}
        {route.page === 'instances' && <InstancesPage />}
        {route.page === 'type' && <TypePage key={`${route.type}/${route.group ?? ''}`} info={info} type={route.type} state={route.state} group={route.group} readOnly={readOnly} />}
        {route.page === 'event' && <EventPage key={`${route.type}/${route.id}`} type={route.type} id={route.id} readOnly={readOnly} />}
      </main>
    </ConfirmProvider>
  );
}

render(<App />, document.getElementById('app')!);
