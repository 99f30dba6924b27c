import { api } from './api';
import { absolute, relative } from './format';
import { usePolling } from './use-polling';

/** The instances handling events under the prefix, as they answer now: who consumes what, and how busy it is. */
export function InstancesPage() {
  const instances = usePolling(() => api.instances(), 'instances', 5_000);
  const list = instances.value?.instances ?? [];
  return (
    <div class="instances-page">
      <h1>Instances</h1>
      {instances.error && <p class="error">{instances.error}</p>}
      {instances.value && list.length === 0 && <p class="muted">No live instance handles events under this prefix (an instance answers while it has handlers).</p>}
      {list.length > 0 && (
        <table class="events" data-testid="instances">
          <thead>
            <tr>
              <th>Instance</th>
              <th>Host</th>
              <th class="num">Pid</th>
              <th>Started</th>
              <th>Handlers (running / parallelism)</th>
            </tr>
          </thead>
          <tbody>
            {list.map((i) => (
              <tr key={i.id} data-instance={i.id}>
                <td class="mono">{i.id}</td>
                <td>{i.host}</td>
                <td class="num">{i.pid}</td>
                <td title={absolute(i.startedAt)}>{relative(i.startedAt)}</td>
                <td>
                  {i.handlers.length === 0
                    ? '–'
                    : i.handlers.map((h) => (
                        <div key={`${h.type}/${h.group}`}>
                          <a href={`#/types/${encodeURIComponent(h.type)}${h.group === 'default' ? '' : `/scheduled?group=${encodeURIComponent(h.group)}`}`}>{h.type}</a>
                          {h.group === 'default' ? '' : ` · ${h.group}`} {h.running}/{h.parallelism}
                        </div>
                      ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
