import { type EventCounts, type EventState, type Explanation, type InspectedEvent, type Inspector, type JsonEvent, type RecurringSchedule, RedisCallTimeoutError } from '../index';
import { count, json, oneLine, printable, shown, span, table, when } from './format';
import { NotFoundError, UsageError, parseDelay, parseWhole } from './parse';

/** What every command works with. */
export interface Context {
  readonly service: Inspector;
  readonly prefix: string;
  readonly json: boolean;
  /** Prints a block of output (a newline is added). */
  readonly out: (text: string) => void;
  /** Resolves when the user agreed (or --yes was given); throws a UsageError otherwise. */
  readonly confirm: (question: string, yes: boolean) => Promise<void>;
  /** How long one Redis read may take (--timeout); the service's calls have it as their deadline too. */
  readonly timeoutMs: number;
}

/** The types under the prefix, within the command's timeout: their SCAN has no deadline of its own. */
export function typesWithin(ctx: Context): ReturnType<Inspector['types']> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RedisCallTimeoutError('types (SCAN)', ctx.timeoutMs)), ctx.timeoutMs);
  });
  return Promise.race([ctx.service.types(), late]).finally(() => clearTimeout(timer));
}

export interface PageOptions {
  readonly group?: string;
  readonly limit?: string;
  readonly offset?: string;
}

/** The states `list --state` takes, in the order they are shown. */
const EVENT_STATES: readonly EventState[] = ['scheduled', 'ready', 'in-flight', 'dead', 'handled', 'waiting'];
const STATE_LABEL: Readonly<Record<EventState, string>> = { scheduled: 'scheduled', ready: 'ready', 'in-flight': 'in flight', dead: 'dead', handled: 'handled', waiting: 'waiting' };

export function unknownType(ctx: Context, type: string): NotFoundError {
  return new NotFoundError(`no events, groups or pause of type '${shown(type)}' under prefix '${ctx.prefix}' (\`delayed-events types\` lists what there is)`);
}

/** The type's counts; a NotFoundError when nothing of it is stored. */
export async function countsOf(ctx: Context, type: string): Promise<EventCounts> {
  const counts = await ctx.service.counts(type);
  if (!counts) throw unknownType(ctx, type);
  return counts;
}

export async function types(ctx: Context): Promise<void> {
  const found = await typesWithin(ctx);
  if (ctx.json) return ctx.out(json(found));
  if (found.length === 0) return ctx.out(`no event types under prefix '${ctx.prefix}'`);
  ctx.out(
    table(
      ['TYPE', 'PARTITIONS', 'GROUPS', 'PAUSED', 'SCHEDULES'],
      found.map((t) => [t.type, String(t.partitions), t.groups.join(', ') || '-', t.paused ? 'yes' : 'no', t.schedules ? count(t.schedules) : '-']),
    ),
  );
}

/** A type listed for its recurring schedules alone has nothing stored yet: it counts as zeros. */
const NOTHING_STORED: EventCounts = { scheduled: 0, ready: 0, inFlight: 0, dead: 0, waiting: 0 };

export async function stats(ctx: Context, type: string | undefined): Promise<void> {
  const listed = type === undefined ? await typesWithin(ctx) : undefined;
  const names = listed ? listed.map((t) => t.type) : [type!];
  const rows = await Promise.all(
    names.map(async (name) => {
      // types() lists schedule-only types on purpose: one named on the command line must be stored or scheduled.
      const counts = (await ctx.service.counts(name)) ?? (listed || (await ctx.service.schedules(name)).length > 0 ? NOTHING_STORED : await countsOf(ctx, name));
      return { type: name, paused: await ctx.service.isPaused(name), ...counts };
    }),
  );
  if (ctx.json) return ctx.out(json(type === undefined ? rows : rows[0]));
  if (rows.length === 0) return ctx.out(`no event types under prefix '${ctx.prefix}'`);
  const cells = (c: EventCounts) => [count(c.scheduled), count(c.ready), count(c.inFlight), count(c.dead), count(c.waiting ?? 0)];
  ctx.out(
    table(
      ['TYPE', 'GROUP', 'SCHEDULED', 'READY', 'IN FLIGHT', 'DEAD', 'WAITING', 'PAUSED'],
      rows.flatMap((r) => [[r.type, '-', ...cells(r), r.paused ? 'yes' : 'no'], ...Object.entries(r.groups ?? {}).map(([group, c]) => [r.type, group, ...cells(c), r.paused ? 'yes' : 'no'])]),
    ),
  );
}

export async function list(ctx: Context, type: string, options: PageOptions & { state?: string }): Promise<void> {
  const state = (options.state ?? 'scheduled') as EventState;
  if (!EVENT_STATES.includes(state)) throw new UsageError(`--state must be one of ${EVENT_STATES.join(', ')}, got ${JSON.stringify(options.state)}`);
  const limit = parseWhole('--limit', options.limit, 20, 1, 1_000);
  const offset = parseWhole('--offset', options.offset, 0, 0, Number.MAX_SAFE_INTEGER);
  const counts = await countsOf(ctx, type);
  const events = await ctx.service.list(type, state, { offset, limit, ...(options.group ? { group: options.group } : {}) });
  if (ctx.json) return ctx.out(json(events));
  const inState = options.group ? counts.groups?.[options.group] : counts;
  // The history is not counted: a page says only what it holds.
  const total = state === 'handled' ? offset + events.length : inState ? inState[state === 'in-flight' ? 'inFlight' : state] : 0;
  if (events.length === 0) return ctx.out(`no ${STATE_LABEL[state]} events of '${shown(type)}'${options.group ? ` in group '${options.group}'` : ''} from offset ${offset} (${count(total)} in all)`);
  const now = Date.now();
  const rows = events.map((e): string[] => {
    switch (state) {
      case 'scheduled':
        return [e.id, when(e.dueAt, now), String(e.attempt), when(e.enqueuedAt, now)];
      case 'ready':
        return [e.id, when(e.dueAt, now), String(e.attempt), String(e.priority)];
      case 'in-flight':
        return [e.id, String(e.attempt), when(e.leaseExpiresAt, now), when(e.dueAt, now)];
      case 'dead':
        return [e.id, when(e.deadLetteredAt, now), String(e.attempt), oneLine(e.lastError ?? '-', 60)];
      case 'handled':
        return [e.id, when(e.handledAt, now), String(e.attempt), when(e.dueAt, now)];
      case 'waiting':
        return [e.id, when(e.dueAt, now), String(e.attempt), when(e.enqueuedAt, now)];
    }
  });
  const headers: Record<EventState, string[]> = {
    scheduled: ['ID', 'DUE', 'ATTEMPTS', 'ENQUEUED'],
    ready: ['ID', 'DUE', 'ATTEMPTS', 'PRIORITY'],
    'in-flight': ['ID', 'ATTEMPT', 'LEASE EXPIRES', 'DUE'],
    dead: ['ID', 'DEAD SINCE', 'ATTEMPTS', 'LAST ERROR'],
    handled: ['ID', 'HANDLED', 'ATTEMPTS', 'DUE'],
    waiting: ['ID', 'DUE ONCE CHILDREN ARE DONE', 'ATTEMPTS', 'ENQUEUED'],
  };
  const more = offset + events.length < total ? `; --offset ${offset + events.length} for more` : '';
  ctx.out(`${table(headers[state], rows)}\n${offset + 1}-${offset + events.length} of ${count(total)} ${STATE_LABEL[state]}${more}`);
}

/** One event, as `show` prints it. */
function describeEvent(type: string, e: InspectedEvent<JsonEvent>, explanation?: Explanation): string {
  const now = Date.now();
  const fields: Array<[string, string]> = [
    ['id', e.id],
    ['type', type],
    ['state', STATE_LABEL[e.state]],
    ['due', when(e.dueAt, now)],
    ['attempts', e.maxAttempts === undefined ? String(e.attempt) : `${e.attempt} of ${e.maxAttempts}`],
    ['priority', String(e.priority)],
    ['enqueued', when(e.enqueuedAt, now)],
  ];
  if (e.snoozes) fields.push(['snoozes', String(e.snoozes)]);
  // The enqueue windows (since 0.6): a debounced burst, a trailing call held behind this one, a throttle window.
  if (e.burstStartedAt) fields.push(['burst since', when(e.burstStartedAt, now)]);
  if (e.dueBy) fields.push(['due by', when(e.dueBy, now)]);
  if (e.trailingDueAt) fields.push(['trailing call', `held until this one settles, due ${when(e.trailingDueAt, now)}`]);
  if (e.throttledUntil) fields.push(['throttled until', when(e.throttledUntil, now)]);
  if (e.waitingFor) fields.push(['waiting for', e.waitingFor.length === 0 ? 'nothing (its children are done)' : e.waitingFor.map((c) => `${shown(c.type)} ${shown(c.id)}`).join(', ')]);
  if (e.leaseExpiresAt) fields.push(['lease until', when(e.leaseExpiresAt, now)]);
  if (e.deadLetteredAt) fields.push(['dead since', when(e.deadLetteredAt, now)]);
  if (e.handledAt) fields.push(['handled', when(e.handledAt, now)]);
  if (e.groups)
    fields.push([
      'groups',
      Object.entries(e.groups)
        .map(([g, s]) => `${g}: ${STATE_LABEL[s]}`)
        .join(', ') || '-',
    ]);
  fields.push(['context', Object.keys(e.context).length > 0 ? JSON.stringify(e.context) : '-']);
  fields.push(['last error', e.lastError ?? '-']);
  for (const error of e.errors ?? []) fields.push([`attempt ${error.attempt}`, `${when(error.at, now)}: ${oneLine(error.message, 120)}`]);
  if (e.progress !== undefined) fields.push(['progress', oneLine(JSON.stringify(e.progress), 120)]);
  if (e.result !== undefined) fields.push(['result', oneLine(JSON.stringify(e.result), 120)]);
  for (const line of e.logs ?? []) fields.push([`log ${line.attempt}`, `${when(line.at, now)}: ${oneLine(line.line, 120)}`]);
  if (e.decodeError) fields.push(['unreadable', e.decodeError]);
  // Why it waits, or what it does (explain(), since 0.6): one line per group.
  for (const g of explanation?.groups ?? []) fields.push([explanation!.groups.length > 1 ? `why (${g.group})` : 'why', g.text]);
  const width = Math.max(...fields.map(([k]) => k.length));
  const event = e.event === undefined ? '-' : json(e.event);
  return [
    ...fields.map(([k, v]) => `${k.padEnd(width)}  ${shown(v)}`),
    `${'event'.padEnd(width)}  ${printable(event)
      .split('\n')
      .join(`\n${' '.repeat(width + 2)}`)}`,
  ].join('\n');
}

export async function show(ctx: Context, type: string, id: string): Promise<void> {
  const event = await findEvent(ctx, type, id);
  // Why it waits (since 0.6), read beside it.
  const explanation = await ctx.service.explain(type, id);
  ctx.out(ctx.json ? json({ type, ...event, ...(explanation ? { explanation } : {}) }) : describeEvent(type, event, explanation));
}

async function findEvent(ctx: Context, type: string, id: string): Promise<InspectedEvent<JsonEvent>> {
  const event = await ctx.service.find(type, id);
  if (event) return event;
  await countsOf(ctx, type); // says which is missing: the type or the event
  throw new NotFoundError(`no event '${shown(id)}' of type '${shown(type)}' under prefix '${ctx.prefix}'`);
}

export async function cancel(ctx: Context, type: string, id: string, yes: boolean): Promise<void> {
  const event = await findEvent(ctx, type, id);
  await ctx.confirm(`Cancel event '${shown(id)}' of '${shown(type)}' (${STATE_LABEL[event.state]}, due ${when(event.dueAt)})? It is deleted for good.`, yes);
  if (!(await ctx.service.cancel(type, id))) throw new NotFoundError(`event '${shown(id)}' of type '${shown(type)}' is gone already`);
  ctx.out(ctx.json ? json({ type, id, cancelled: true }) : `cancelled '${shown(id)}' of '${shown(type)}'`);
}

/** reschedule and run-now: only a scheduled or ready event moves. */
async function moved(ctx: Context, type: string, id: string, done: boolean, verb: string): Promise<void> {
  if (!done) {
    const event = await findEvent(ctx, type, id);
    throw new NotFoundError(`event '${shown(id)}' of '${shown(type)}' is ${STATE_LABEL[event.state]}: only a scheduled or ready event can be moved`);
  }
  const event = await ctx.service.find(type, id);
  const dueAt = event?.dueAt;
  ctx.out(ctx.json ? json({ type, id, state: event?.state ?? 'ready', dueAt }) : `${verb} '${shown(id)}' of '${shown(type)}': due ${when(dueAt)}${event?.state === 'ready' ? ', ready' : ''}`);
}

export async function reschedule(ctx: Context, type: string, id: string, delay: string): Promise<void> {
  const due = parseDelay(delay);
  await moved(ctx, type, id, await ctx.service.reschedule(type, id, due), 'rescheduled');
}

export async function runNow(ctx: Context, type: string, id: string): Promise<void> {
  await moved(ctx, type, id, await ctx.service.runNow(type, id), 'ran now');
}

export async function pause(ctx: Context, type: string, paused: boolean): Promise<void> {
  const known = paused ? await ctx.service.pause(type) : await ctx.service.resume(type);
  if (!known) throw unknownType(ctx, type);
  if (ctx.json) return ctx.out(json({ type, paused }));
  ctx.out(
    paused
      ? `paused '${shown(type)}': no instance dispatches or claims its events until \`delayed-events resume ${type}\`; enqueues still store them`
      : `resumed '${shown(type)}': instances dispatch and claim its events again`,
  );
}

/** The groups a dead-letter command acts on: the one given, or every group of the type with dead letters (the default group first). */
function deadGroups(counts: EventCounts, group: string | undefined): Array<{ group: string; dead: number }> {
  if (group) return [{ group, dead: counts.groups?.[group]?.dead ?? (group === 'default' ? counts.dead : 0) }];
  const all = counts.groups && Object.keys(counts.groups).length > 0 ? Object.entries(counts.groups).map(([g, c]) => ({ group: g, dead: c.dead })) : [{ group: 'default', dead: counts.dead }];
  if (!all.some((g) => g.group === 'default')) all.unshift({ group: 'default', dead: counts.dead });
  return all.filter((g) => g.dead > 0).sort((a, b) => (a.group === 'default' ? -1 : b.group === 'default' ? 1 : a.group.localeCompare(b.group)));
}

function inGroups(groups: ReadonlyArray<{ group: string }>): string {
  return groups.length === 1 && groups[0]!.group === 'default' ? '' : ` in group${groups.length === 1 ? '' : 's'} ${groups.map((g) => `'${g.group}'`).join(', ')}`;
}

export async function dead(ctx: Context, type: string, options: PageOptions): Promise<void> {
  const limit = parseWhole('--limit', options.limit, 20, 1, 1_000);
  const offset = parseWhole('--offset', options.offset, 0, 0, Number.MAX_SAFE_INTEGER);
  const counts = await countsOf(ctx, type);
  // Without --group, every group that holds dead letters: a group's are never hidden behind the default group's none.
  const groups = deadGroups(counts, options.group);
  const pages = await Promise.all(groups.map(async ({ group, dead: total }) => ({ group, total, letters: await ctx.service.deadLetters(type, { offset, limit, group }) })));
  // Named groups involved: each letter says its group (a type with the default group alone prints as it always did).
  const named = !options.group && groups.some((g) => g.group !== 'default');
  if (ctx.json) return ctx.out(json(pages.flatMap((p) => p.letters.map((l) => (named ? { group: p.group, ...l } : l)))));
  if (groups.length === 0 || pages.every((p) => p.letters.length === 0)) {
    const total = groups.reduce((n, g) => n + g.dead, 0);
    return ctx.out(`no dead letters of '${shown(type)}'${options.group ? ` in group '${options.group}'` : ' in any group'} from offset ${offset} (${count(total)} in all)`);
  }
  const now = Date.now();
  const lines: string[] = [];
  for (const { group, total, letters } of pages) {
    if (letters.length === 0) continue;
    const more = offset + letters.length < total ? `; --offset ${offset + letters.length} for more` : '';
    const rows = letters.map((l) => [l.id, ...(named ? [group] : []), when(l.deadLetteredAt, now), String(l.attempts), oneLine(l.error || '-', 60)]);
    lines.push(
      `${table(['ID', ...(named ? ['GROUP'] : []), 'DEAD SINCE', 'ATTEMPTS', 'ERROR'], rows)}\n${offset + 1}-${offset + letters.length} of ${count(total)} dead${group === 'default' ? '' : ` in group '${group}'`}${more}`,
    );
  }
  ctx.out(lines.join('\n\n'));
}

export async function replay(ctx: Context, type: string, ids: readonly string[], options: { group?: string; yes: boolean }): Promise<void> {
  await onDeadLetters(ctx, type, ids, options, 'replay');
}

export async function purge(ctx: Context, type: string, ids: readonly string[], options: { group?: string; yes: boolean }): Promise<void> {
  await onDeadLetters(ctx, type, ids, options, 'purge');
}

/**
 * Replays or purges dead letters: of `--group`, or of every group holding
 * some. Says what was done in each group; nothing done is no success (exit 1).
 */
async function onDeadLetters(ctx: Context, type: string, ids: readonly string[], options: { group?: string; yes: boolean }, action: 'replay' | 'purge'): Promise<void> {
  const counts = await countsOf(ctx, type);
  const groups = deadGroups(counts, options.group);
  const total = groups.reduce((n, g) => n + g.dead, 0);
  if (total === 0)
    throw new NotFoundError(`no dead letters of '${shown(type)}'${options.group ? ` in group '${options.group}'` : ' in any group'}; nothing was ${action === 'replay' ? 'replayed' : 'purged'}`);
  const what = ids.length > 0 ? `${ids.length} dead letter(s)` : `all ${count(total)} dead letters`;
  await ctx.confirm(
    action === 'replay' ? `Replay ${what} of '${shown(type)}'${inGroups(groups)}? They are due at once.` : `Delete ${what} of '${shown(type)}'${inGroups(groups)} for good?`,
    action === 'purge' || ids.length === 0 ? options.yes : true,
  );
  const done: Record<string, number> = {};
  for (const { group } of groups) {
    const selection = ids.length > 0 ? ids : undefined;
    done[group] = action === 'replay' ? await ctx.service.replayDeadLetters(type, selection, { group }) : await ctx.service.purgeDeadLetters(type, selection, { group });
  }
  const sum = Object.values(done).reduce((a, b) => a + b, 0);
  if (sum === 0) {
    const which = ids.length > 0 ? `none of ${ids.join(', ')} is a dead letter` : 'no dead letter is left';
    throw new NotFoundError(`${which} of '${shown(type)}'${inGroups(groups)}; nothing was ${action === 'replay' ? 'replayed' : 'purged'}`);
  }
  const verb = action === 'replay' ? 'replayed' : 'purged';
  const named = Object.keys(done).some((g) => g !== 'default');
  if (ctx.json) return ctx.out(json({ type, [verb]: sum, ...(named ? { groups: done } : {}) }));
  const perGroup = Object.entries(done)
    .filter(([, n]) => n > 0)
    .map(([g, n]) => `${count(n)} in '${g}'`)
    .join(', ');
  ctx.out(`${verb} ${count(sum)} dead letter(s) of '${shown(type)}'${named ? ` (${perGroup})` : ''}${action === 'replay' ? ': due now' : ''}`);
}

export async function schedules(ctx: Context, type: string | undefined): Promise<void> {
  const found = await ctx.service.schedules(type);
  if (ctx.json) return ctx.out(json(found));
  if (found.length === 0) return ctx.out(`no recurring schedules${type === undefined ? '' : ` of '${shown(type)}'`} under prefix '${ctx.prefix}'`);
  ctx.out(
    table(
      [...(type === undefined ? ['TYPE'] : []), 'NAME', 'SPEC', 'NEXT', 'CATCH UP', 'LAST', 'POLICY', 'SKIPPED', 'REMAINING'],
      found
        .map((s) => ['every' in s.spec ? `every ${span(s.spec.every)}` : `cron '${s.spec.cron}' ${s.spec.tz}`, s] as const)
        .map(([spec, s]) => [
          ...(type === undefined ? [s.type] : []),
          s.name,
          spec,
          s.paused ? `paused (${s.pausedReason ?? 'paused'})` : s.next ? when(s.next) : 'ended',
          s.catchUpWindowMs !== undefined ? `${s.catchUp} within ${span(s.catchUpWindowMs)}` : s.catchUp,
          s.last ? when(s.last) : '-',
          schedulePolicy(s),
          count(s.skipped),
          s.remaining !== undefined ? count(s.remaining) : '-',
        ]),
    ),
  );
}

/** A schedule's policy in a few words (since 0.6); '-' for none. */
function schedulePolicy(s: RecurringSchedule): string {
  const parts = [
    s.overlap !== 'allow' ? `overlap ${s.overlap}` : '',
    s.limit !== undefined ? `limit ${count(s.limit)}` : '',
    s.immediately ? 'immediately' : '',
    s.jitterMs > 0 ? `jitter ${span(s.jitterMs)}` : '',
    s.pauseOnFailure ? 'pause on failure' : '',
    s.waiting ? `one waiting (${when(s.waiting)})` : '',
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(', ') : '-';
}

export async function limits(ctx: Context, type: string): Promise<void> {
  const found = await ctx.service.limits(type);
  if (!found) throw unknownType(ctx, type);
  if (ctx.json) return ctx.out(json(found));
  const rows = Object.entries(found).map(([group, use]) => [
    group,
    use.rate ? `${count(use.rate.max)} per ${span(use.rate.perMs)}` : '-',
    use.rate ? count(use.started ?? 0) : '-',
    use.concurrency !== undefined ? count(use.concurrency) : '-',
    count(use.running),
    use.heldForMs !== undefined ? span(use.heldForMs) : '-',
    use.perKey
      ? `${[use.perKey.rate ? `${count(use.perKey.rate.max)} per ${span(use.perKey.rate.perMs)}` : '', use.perKey.concurrency !== undefined ? `${count(use.perKey.concurrency)} at once` : ''].filter(Boolean).join(', ') || 'turns'} (${count(use.keysWaiting ?? 0)} waiting)`
      : '-',
  ]);
  if (rows.length === 0) return ctx.out(`no flow limits on '${shown(type)}'`);
  ctx.out(table(['GROUP', 'RATE LIMIT', 'IN WINDOW', 'CONCURRENCY', 'RUNNING', 'HELD FOR', 'PER KEY (KEYS)'], rows));
}

export async function versions(ctx: Context, type: string): Promise<void> {
  const found = await ctx.service.versions(type);
  if (!found) throw unknownType(ctx, type);
  if (ctx.json) return ctx.out(json(found));
  const rows = Object.entries(found.byVersion).map(([version, n]) => ['events', version, count(n)]);
  for (const [version, n] of Object.entries(found.schedules ?? {})) rows.push(['schedule templates', version, count(n)]);
  if (rows.length === 0) return ctx.out(`nothing stored of '${shown(type)}'`);
  ctx.out(table(['STORED', 'VERSION', 'COUNT'], rows));
}

export async function instances(ctx: Context): Promise<void> {
  const found = await ctx.service.instances();
  if (ctx.json) return ctx.out(json(found));
  if (found.length === 0) return ctx.out(`no instance handling events under prefix '${ctx.prefix}' answered (an instance answers while it has handlers)`);
  const now = Date.now();
  ctx.out(
    table(
      ['INSTANCE', 'HOST', 'PID', 'STARTED', 'HANDLERS (type/group running/parallelism)'],
      found.map((i) => [i.id, i.host, String(i.pid), when(i.startedAt, now), i.handlers.map((h) => `${h.type}/${h.group} ${h.running}/${h.parallelism}`).join(', ') || '-']),
    ),
  );
}

export async function unschedule(ctx: Context, type: string, name: string, yes: boolean): Promise<void> {
  await ctx.confirm(`Remove the recurring schedule '${shown(name)}' of '${shown(type)}'? No occurrence is enqueued after this.`, yes);
  if (!(await ctx.service.unschedule(type, name))) throw new NotFoundError(`no recurring schedule '${shown(name)}' of '${shown(type)}' under prefix '${ctx.prefix}'`);
  ctx.out(ctx.json ? json({ type, name, removed: true }) : `removed the recurring schedule '${shown(name)}' of '${shown(type)}'`);
}
