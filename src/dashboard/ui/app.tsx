import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { type EventState, type Overview, STATES } from './api';
import { ConfirmProvider } from './confirm';
import { EventPage } from './event-page';
import { OverviewPage } from './overview-page';
import { TypePage } from './type-page';

type Route = { page: 'overview' } | { page: 'type'; type: string; state: EventState; group?: string } | { page: 'event'; type: string; id: string };

/** `#/`, `#/types/<type>[/<state>][?group=g]`, `#/types/<type>/events/<id>`: the hash keeps routing in the page, whatever path it is mounted under. */
function parseRoute(hash: string): Route {
  const [path = '', query = ''] = hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const group = new URLSearchParams(query).get('group') ?? undefined;
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
  const info = route.page === 'overview' ? undefined : overview?.types.find((t) => t.type === route.type);
  return (
    <ConfirmProvider>
      <header class="top">
        <a class="brand" href="#/">
          Delayed events
        </a>
        {overview && <span class="muted">prefix '{overview.prefix}'</span>}
        {overview?.readOnly && <span class="badge">read-only</span>}
        <span class={connected ? 'live on' : 'live'} data-testid="live" title={connected ? 'Updating live' : 'Reconnecting…'}>
          {connected ? 'live' : 'offline'}
        </span>
      </header>
      <main>
        {error && <p class="error">Redis: {error}</p>}
        {route.page === 'overview' && <OverviewPage overview={overview} />}
        {route.page === 'type' && <TypePage key={`${route.type}/${route.group ?? ''}`} info={info} type={route.type} state={route.state} group={route.group} readOnly={readOnly} />}
        {route.page === 'event' && <EventPage key={`${route.type}/${route.id}`} type={route.type} id={route.id} readOnly={readOnly} />}
      </main>
    </ConfirmProvider>
  );
}

render(<App />, document.getElementById('app')!);
