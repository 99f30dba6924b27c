import type { Context } from './commands';
import { json, shown } from './format';
import { NotFoundError } from './parse';

// Pausing and resuming one recurring schedule (since 0.6), without pausing its type.

export async function pauseSchedule(ctx: Context, type: string, name: string): Promise<void> {
  if (!(await ctx.service.pauseSchedule(type, name))) throw new NotFoundError(`no recurring schedule '${shown(name)}' of '${shown(type)}' under prefix '${ctx.prefix}'`);
  ctx.out(ctx.json ? json({ type, name, paused: true }) : `paused the recurring schedule '${shown(name)}' of '${shown(type)}': nothing is enqueued until resume-schedule`);
}

export async function resumeSchedule(ctx: Context, type: string, name: string): Promise<void> {
  if (!(await ctx.service.resumeSchedule(type, name))) throw new NotFoundError(`no recurring schedule '${shown(name)}' of '${shown(type)}' under prefix '${ctx.prefix}'`);
  ctx.out(ctx.json ? json({ type, name, paused: false }) : `resumed the recurring schedule '${shown(name)}' of '${shown(type)}' from now on`);
}
