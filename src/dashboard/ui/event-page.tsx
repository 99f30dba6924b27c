import { useState } from 'preact/hooks';
import { api } from './api';
import { useConfirm } from './confirm';
import { STATE_LABEL, absolute, pretty, relative } from './format';
import { usePolling } from './use-polling';

function Field(props: { label: string; value: string | number | undefined; title?: string; testId?: string }) {
  if (props.value === undefined || props.value === '') return null;
  return (
    <>
      <dt>{props.label}</dt>
      <dd title={props.title} data-testid={props.testId}>
        {props.value}
      </dd>
    </>
  );
}

/** One event: everything stored of it, with the actions its state allows. */
export function EventPage(props: { type: string; id: string; readOnly: boolean }) {
  const { type, id } = props;
  const confirm = useConfirm();
  const [delay, setDelay] = useState('5m');
  const [message, setMessage] = useState<string | undefined>(undefined);
  const event = usePolling(() => api.event(type, id), `${type}/${id}`, 3_000);
  const back = `#/types/${encodeURIComponent(type)}/${event.value?.state ?? 'scheduled'}`;

  const act = async (title: string, detail: string, label: string, run: () => Promise<unknown>, done: string | ((answer: unknown) => void), danger = true) => {
    if (!(await confirm(title, detail, label, danger))) return;
    try {
      const answer = await run();
      // What the server says it did, never a success it did not report (a 409 lands in catch).
      if (typeof done === 'string') setMessage(done);
      else done(answer);
      event.refresh();
    } catch (e) {
      setMessage(e instanceof Error ? e.message : String(e));
    }
  };

  const gone = event.error && event.value === undefined;
  const e = event.value;
  // A group's dead letter is replayed or purged in that group; where several hold it dead, the server acts in each.
  const deadIn = e?.groups
    ? Object.entries(e.groups)
        .filter(([, s]) => s === 'dead')
        .map(([g]) => g)
    : [];
  const deadGroup = deadIn.length === 1 ? deadIn[0] : undefined;
  const done = (verb: string) => (answer: unknown) =>
    setMessage(`${verb} ${(answer as { count?: number }).count ?? 0} dead letter${(answer as { count?: number }).count === 1 ? '' : 's'}${deadGroup ? ` in group ${deadGroup}` : ''}`);
  return (
    <div class="event-page">
      <p>
        <a href={back}>← {type}</a>
      </p>
      <h1 class="id">{id}</h1>
      {message && (
        <p class="notice" role="status">
          {message}
        </p>
      )}
      {gone && <p class="muted">{event.error?.includes('no event') || event.error?.startsWith('404') ? 'This event is no longer stored (handled, cancelled or purged).' : event.error}</p>}
      {e && (
        <>
          <dl class="fields" data-testid="event-fields">
            <Field label="State" value={STATE_LABEL[e.state]} testId="event-state" />
            {e.groups && (
              <Field
                label="Per group"
                value={Object.entries(e.groups)
                  .map(([g, s]) => `${g}: ${STATE_LABEL[s]}`)
                  .join(', ')}
              />
            )}
            <Field label="Due" value={`${absolute(e.dueAt)} (${relative(e.dueAt)})`} />
            <Field label="Attempt" value={e.maxAttempts === undefined ? e.attempt : `${e.attempt} of ${e.maxAttempts}`} />
            <Field label="Priority" value={e.priority} testId="event-priority" />
            <Field label="Snoozes" value={e.snoozes} />
            <Field label="Enqueued" value={e.enqueuedAt && `${absolute(e.enqueuedAt)} (${relative(e.enqueuedAt)})`} />
            <Field label="Lease expires" value={e.leaseExpiresAt && `${absolute(e.leaseExpiresAt)} (${relative(e.leaseExpiresAt)})`} />
            <Field label="Dead-lettered" value={e.deadLetteredAt && `${absolute(e.deadLetteredAt)} (${relative(e.deadLetteredAt)})`} />
            <Field label="Handled" value={e.handledAt && `${absolute(e.handledAt)} (${relative(e.handledAt)})`} testId="event-handled" />
          </dl>
          {e.explanation && (
            <>
              <h2>Why it waits</h2>
              <ul class="explanation" data-testid="event-explanation">
                {e.explanation.groups.map((g) => (
                  <li key={g.group}>
                    {e.explanation!.groups.length > 1 && <strong>{g.group}: </strong>}
                    {g.text}
                  </li>
                ))}
              </ul>
            </>
          )}
          {e.progress !== undefined && (
            <>
              <h2>Progress</h2>
              <pre class="json" data-testid="event-progress">
                {pretty(e.progress)}
              </pre>
            </>
          )}
          {e.result !== undefined && (
            <>
              <h2>Result</h2>
              <pre class="json" data-testid="event-result">
                {pretty(e.result)}
              </pre>
            </>
          )}
          {e.logs && e.logs.length > 0 && (
            <>
              <h2>Log</h2>
              <table class="events" data-testid="event-logs">
                <thead>
                  <tr>
                    <th class="num">Attempt</th>
                    <th>When</th>
                    <th>Line</th>
                  </tr>
                </thead>
                <tbody>
                  {e.logs.map((l, i) => (
                    <tr key={`${i}/${l.at}`}>
                      <td class="num">{l.attempt}</td>
                      <td title={absolute(l.at)}>{relative(l.at)}</td>
                      <td>{l.line}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </>
          )}
          {(e.lastError || e.decodeError) && (
            <>
              <h2>{e.decodeError ? 'Cannot decode' : 'Last error'}</h2>
              <pre class="error-text" data-testid="event-error">
                {e.decodeError ?? e.lastError}
              </pre>
            </>
          )}
          {e.errors && e.errors.length > 0 && (
            <>
              <h2>Failures</h2>
              <table class="events" data-testid="event-errors">
                <thead>
                  <tr>
                    <th class="num">Attempt</th>
                    <th>When</th>
                    <th>Error</th>
                  </tr>
                </thead>
                <tbody>
                  {e.errors.map((f) => (
                    <tr key={`${f.attempt}/${f.at}`}>
                      <td class="num">{f.attempt}</td>
                      <td title={absolute(f.at)}>{relative(f.at)}</td>
                      <td class="error-cell">{f.message}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </>
          )}
          <h2>Payload</h2>
          <pre class="json" data-testid="event-payload">
            {pretty(e.event)}
          </pre>
          {Object.keys(e.context).length > 0 && (
            <>
              <h2>Context</h2>
              <pre class="json" data-testid="event-context">
                {pretty(e.context)}
              </pre>
            </>
          )}
          {!props.readOnly && (
            <div class="actions">
              {(e.state === 'scheduled' || e.state === 'ready') && (
                <>
                  <button type="button" class="primary" onClick={() => act('Run now?', `${id} becomes due at once.`, 'Run now', () => api.runNow(type, id), 'Due now', false)}>
                    Run now
                  </button>
                  <form
                    class="inline"
                    onSubmit={(ev) => {
                      ev.preventDefault();
                      void act(
                        'Reschedule?',
                        `${id} becomes due ${delay === 'now' ? 'now' : `at ${delay}`} from now (or at that date).`,
                        'Reschedule',
                        () => api.reschedule(type, id, delay),
                        `Rescheduled to ${delay}`,
                        false,
                      );
                    }}
                  >
                    <input aria-label="New delay" value={delay} onInput={(ev) => setDelay((ev.target as HTMLInputElement).value)} size={14} />
                    <button type="submit">Reschedule</button>
                  </form>
                </>
              )}
              {e.state === 'dead' && (
                <>
                  <button
                    type="button"
                    class="primary"
                    data-testid="replay-one"
                    onClick={() =>
                      act('Replay this dead letter?', `${id} is scheduled again with fresh attempts.`, 'Replay', () => api.replay(type, { ids: [id] }, deadGroup), done('Replayed'), false)
                    }
                  >
                    Replay
                  </button>
                  <button
                    type="button"
                    class="danger"
                    onClick={() => act('Purge this dead letter?', `${id} is deleted for good.`, 'Purge', () => api.purge(type, { ids: [id] }, deadGroup), done('Purged'))}
                  >
                    Purge
                  </button>
                </>
              )}
              {e.state !== 'dead' && e.state !== 'handled' && (
                <button type="button" class="danger" onClick={() => act('Cancel this event?', `${id} is deleted and will not be handled.`, 'Cancel event', () => api.cancel(type, id), 'Cancelled')}>
                  Cancel
                </button>
              )}
            </div>
          )}
        </>
      )}
    </div>
  );
}
