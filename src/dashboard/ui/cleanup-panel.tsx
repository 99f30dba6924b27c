import { useState } from 'preact/hooks';
import { ApiError, api } from './api';
import { useConfirm } from './confirm';
import { count } from './format';

/** The ages a clean-up of dead letters offers, as the API takes them. */
const AGES: ReadonlyArray<readonly [string, string]> = [
  ['1h', 'an hour'],
  ['1d', 'a day'],
  ['7d', 'a week'],
  ['30d', '30 days'],
  ['0', 'any age'],
];

/**
 * The bulk clean-up of a type (since 0.6): drain what waits, delete old dead
 * letters, obliterate the type. Each asks first; obliterate refused because
 * instances handle the type offers to force it, after asking again.
 */
export function CleanupPanel(props: { type: string; group: string | undefined; onMessage: (text: string) => void; onChanged: () => void }) {
  const { type, group, onMessage, onChanged } = props;
  const confirm = useConfirm();
  const [age, setAge] = useState('7d');
  const where = group ? ` in group ${group}` : '';
  const run = async (work: () => Promise<string>) => {
    try {
      onMessage(await work());
      onChanged();
    } catch (e) {
      onMessage(e instanceof Error ? e.message : String(e));
    }
  };
  const drain = async () => {
    const detail = group
      ? `Removes the ready events and retries of group ${group}. Events in flight and dead letters stay.`
      : 'Removes every scheduled event and what is ready in every group. Events in flight and dead letters stay.';
    if (!(await confirm(`Drain ${type}${where}?`, detail, 'Drain'))) return;
    await run(async () => `Drained ${count((await api.drain(type, group)).count)}`);
  };
  const clean = async () => {
    const label = AGES.find(([value]) => value === age)?.[1] ?? age;
    if (!(await confirm(`Delete dead letters of ${type}${where}?`, `Every dead letter older than ${label} is deleted for good.`, 'Delete'))) return;
    await run(async () => `Deleted ${count((await api.clean(type, age, group)).count)} dead letters`);
  };
  const obliterate = async () => {
    if (!(await confirm(`Obliterate ${type}?`, 'Every key of the type goes for good: its events in every state, groups, schedules, history and limits.', 'Obliterate'))) return;
    try {
      await api.obliterate(type, false);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 409)) return onMessage(e instanceof Error ? e.message : String(e));
      if (!(await confirm(`${type} is in use`, `${e.message}`, 'Obliterate anyway'))) return;
      try {
        await api.obliterate(type, true);
      } catch (again) {
        // Stays on the page, so the message can be read.
        return onMessage(again instanceof Error ? again.message : String(again));
      }
    }
    location.hash = '#/';
  };
  return (
    <section class="panel" data-testid="cleanup">
      <h2>Clean up</h2>
      <div class="bulk">
        <button type="button" class="danger" data-testid="drain" onClick={drain}>
          Drain{where}
        </button>
        <label>
          Dead letters older than{' '}
          <select aria-label="Age of the dead letters to delete" value={age} onChange={(e) => setAge((e.target as HTMLSelectElement).value)}>
            {AGES.map(([value, label]) => (
              <option value={value}>{label}</option>
            ))}
          </select>
        </label>
        <button type="button" class="danger" data-testid="clean-dead" onClick={clean}>
          Delete them
        </button>
        <span class="spacer" />
        <button type="button" class="danger" data-testid="obliterate" onClick={obliterate}>
          Obliterate type
        </button>
      </div>
    </section>
  );
}
