import { type Context, countsOf, unknownType } from './commands';
import { count, json, shown, span } from './format';
import { UsageError, parseDelay, parseWhole } from './parse';

// The bulk clean-up (since 0.6): drain, clean, obliterate. Each asks first
// unless --yes, and says what it did; the counts come from the calls.

export async function drain(ctx: Context, type: string, options: { group?: string; yes: boolean }): Promise<void> {
  const counts = await countsOf(ctx, type);
  const what = options.group
    ? `the READY events and retries of group '${shown(options.group)}' of '${shown(type)}'`
    : `every waiting event of '${shown(type)}' (${count(counts.scheduled)} scheduled, and what is READY in every group)`;
  await ctx.confirm(`Remove ${what}? Events in flight and dead letters stay.`, options.yes);
  const drained = await ctx.service.drain(type, options.group ? { group: options.group } : {});
  ctx.out(
    ctx.json
      ? json({ type, drained, ...(options.group ? { group: options.group } : {}) })
      : `drained ${count(drained)} waiting deliveries of '${shown(type)}'${options.group ? ` in group '${options.group}'` : ''}`,
  );
}

export async function clean(ctx: Context, type: string, options: { state?: string; olderThan?: string; limit?: string; group?: string; yes: boolean }): Promise<void> {
  const state = options.state ?? 'dead';
  if (state !== 'dead' && state !== 'handled') throw new UsageError(`--state must be dead or handled, got ${JSON.stringify(state)}`);
  if (options.olderThan === undefined) throw new UsageError('--older-than is required: how old a dead letter (or history record) must be to go, such as 7d or 12h; 0 takes all');
  const age = options.olderThan === '0' ? 0 : parseDelay(options.olderThan);
  if (age instanceof Date || typeof age !== 'number') throw new UsageError(`--older-than takes a duration such as 7d, 12h or 0, got ${JSON.stringify(options.olderThan)}`);
  const limit = options.limit === undefined ? undefined : parseWhole('--limit', options.limit, 0, 1, Number.MAX_SAFE_INTEGER);
  await countsOf(ctx, type);
  const which = state === 'dead' ? 'dead letters' : 'records of the history';
  await ctx.confirm(
    `Delete the ${which} of '${shown(type)}'${options.group ? ` in group '${options.group}'` : ''} older than ${age === 0 ? 'now' : span(age)}${limit ? ` (at most ${count(limit)})` : ''} for good?`,
    options.yes,
  );
  const cleaned = await ctx.service.clean(type, state, { olderThanMs: age, ...(limit ? { limit } : {}), ...(options.group ? { group: options.group } : {}) });
  ctx.out(ctx.json ? json({ type, state, cleaned }) : `deleted ${count(cleaned)} ${which} of '${shown(type)}'`);
}

export async function obliterate(ctx: Context, type: string, options: { force: boolean; yes: boolean }): Promise<void> {
  await ctx.confirm(
    `Remove every key of '${shown(type)}' (its events in every state, groups, schedules, history, limits) for good?${options.force ? ' Instances handling it are not waited for (--force).' : ''}`,
    options.yes,
  );
  if (!(await ctx.service.obliterate(type, { force: options.force }))) {
    // Nothing stored, and no schedule: as any command on an unknown type.
    throw unknownType(ctx, type);
  }
  ctx.out(ctx.json ? json({ type, obliterated: true }) : `obliterated '${shown(type)}': a handler added afterwards (or a schedule) starts it again`);
}
