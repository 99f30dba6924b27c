import { useState } from 'preact/hooks';
import { api } from './api';
import { useConfirm } from './confirm';
import { absolute, readableSpec, relative, schedulePolicy } from './format';
import { usePolling } from './use-polling';

/** Every recurring schedule under the prefix, whatever its type stores now, with unschedule. */
export function SchedulesPage(props: { readOnly: boolean }) {
  const confirm = useConfirm();
  const [message, setMessage] = useState<string | undefined>(undefined);
  const schedules = usePolling(() => api.allSchedules(), 'all', 10_000);
  const list = schedules.value?.schedules ?? [];
  return (
    <div class="schedules-page">
      <h1>Recurring schedules</h1>
      {message && (
        <p class="notice" role="status">
          {message}
        </p>
      )}
      {schedules.error && <p class="error">{schedules.error}</p>}
      {schedules.value && list.length === 0 && <p class="muted">No recurring schedules under this prefix.</p>}
      {list.length > 0 && (
        <table class="events" data-testid="schedules">
          <thead>
            <tr>
              <th>Type</th>
              <th>Name</th>
              <th>When</th>
              <th>Next run</th>
              <th>Last run</th>
              <th>Catch-up</th>
              <th>Policy</th>
              <th class="num">Skipped</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.map((s) => (
              <tr key={`${s.type}/${s.name}`} data-schedule={`${s.type}/${s.name}`}>
                <td>
                  <a href={`#/types/${encodeURIComponent(s.type)}`}>{s.type}</a>
                </td>
                <td>{s.name}</td>
                <td>{readableSpec(s.spec)}</td>
                <td title={absolute(s.next)}>
                  {s.paused ? (
                    <span class="badge paused" title={s.pausedReason}>
                      paused
                    </span>
                  ) : s.next ? (
                    relative(s.next)
                  ) : (
                    'ended'
                  )}
                </td>
                <td title={absolute(s.last)}>{s.last ? relative(s.last) : '–'}</td>
                <td>{s.catchUpWindowMs !== undefined ? `${s.catchUp} within ${Math.round(s.catchUpWindowMs / 1_000)} s` : s.catchUp}</td>
                <td data-testid="schedule-policy">{schedulePolicy(s)}</td>
                <td class="num">{s.skipped ?? 0}</td>
                <td>
                  {!props.readOnly && (
                    <button
                      type="button"
                      data-testid="schedule-pause"
                      onClick={async () => {
                        try {
                          await (s.paused ? api.resumeSchedule(s.type, s.name) : api.pauseSchedule(s.type, s.name));
                          setMessage(`${s.paused ? 'Resumed' : 'Paused'} schedule ${s.name} of ${s.type}`);
                        } catch (e) {
                          setMessage(e instanceof Error ? e.message : String(e));
                        }
                        schedules.refresh();
                      }}
                    >
                      {s.paused ? 'Resume' : 'Pause'}
                    </button>
                  )}
                  {!props.readOnly && (
                    <button
                      type="button"
                      class="danger"
                      onClick={async () => {
                        if (!(await confirm(`Remove schedule ${s.name} of ${s.type}?`, 'No further occurrences are enqueued; those already stored stay.', 'Remove'))) return;
                        try {
                          await api.unschedule(s.type, s.name);
                          setMessage(`Removed schedule ${s.name} of ${s.type}`);
                        } catch (e) {
                          setMessage(e instanceof Error ? e.message : String(e));
                        }
                        schedules.refresh();
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
      )}
    </div>
  );
}
