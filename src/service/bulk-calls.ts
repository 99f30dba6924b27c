import { hostname } from 'node:os';
import { type EventRoute, eventRouteOf } from '../core/delayed-event.decorator';
import { checkGroupArgument, checkIntegerArgument } from '../core/arguments';
import { InvalidArgumentError, TypeInUseError } from '../core/errors';
import { checkArgumentKeys } from '../core/option-keys';
import type { AllowedKeys } from '../core/option-keys';
import { cleanQueue, drainQueue, namedGroupsOf, obliterateQueue, obliterateTypeKeys, queueHoldsAnything } from '../redis/housekeeping';
import { askInstances } from '../redis/instance-registry';
import { DEFAULT_GROUP, type TypeKeys } from '../redis/redis-layout';
import { ACTIVITY_RETENTION_MS } from '../runtime/activity-log';
import { checkTarget } from './inspection-checks';
import type { EventTarget } from './inspection-types';
import { InspectorCalls } from './inspector-calls';

/** drain()'s options. */
export interface DrainOptions {
  /** Only this group's READY and retry-scheduled deliveries; default: the type's schedule and every group's READY events. */
  readonly group?: string;
}

/** clean()'s options. */
export interface CleanOptions {
  /** Only those dead-lettered (or handled) more than this many ms ago; 0 takes all. Required. */
  readonly olderThanMs: number;
  /** At most this many (oldest first in each partition); default: all. */
  readonly limit?: number;
  /** The group whose dead letters or history to clean; default: the default group. */
  readonly group?: string;
}

/** obliterate()'s options. */
export interface ObliterateOptions {
  /** Remove it even while instances() shows an instance handling it. */
  readonly force?: boolean;
}

export const DRAIN_OPTION_KEYS = { group: true } as const satisfies AllowedKeys<DrainOptions>;
export const CLEAN_OPTION_KEYS = { olderThanMs: true, limit: true, group: true } as const satisfies AllowedKeys<CleanOptions>;
export const OBLITERATE_OPTION_KEYS = { force: true } as const satisfies AllowedKeys<ObliterateOptions>;

/** Up to 100 years, as a delay may be: any age a user means. */
const MOST_AGE_MS = 100 * 365 * 86_400_000;

/**
 * The bulk clean-up calls (docs/api.md, "Clean-up"; since 0.6): each runs as
 * bounded script steps per queue (src/redis/housekeeping.ts), so none holds
 * Redis for long, and each is safe beside running handlers and enqueues: an
 * event in flight is never touched, and its result is fenced as usual.
 */
export abstract class BulkCalls extends InspectorCalls {
  /**
   * Removes waiting events: without `group`, the type's schedule and every
   * group's READY events; with `group`, that group's READY events and its
   * retries (and snoozed deliveries). In flight and dead events stay; no idempotency mark is written.
   * Events stored after it started may survive. Resolves how many deliveries
   * went (an event ready in two groups counts twice).
   */
  drain(target: EventTarget, options: DrainOptions = {}): Promise<number> {
    const check = () => {
      checkTarget(target);
      checkArgumentKeys(options, DRAIN_OPTION_KEYS, 'drain');
      return options.group === undefined ? undefined : checkGroupArgument(options.group);
    };
    return this.whenReady(check, async (group) => {
      const resolved = await this.resolve(target);
      if (!resolved) return 0;
      let total = 0;
      for (const keys of resolved.queues) {
        if (group !== undefined) {
          // A named group's retries are its own schedule; the default group's share the type's with new events.
          total += await drainQueue(this.parts.scripts, this.parts.layout.forGroup(keys, group), group === DEFAULT_GROUP ? 'retries' : 'schedule');
          continue;
        }
        total += await drainQueue(this.parts.scripts, keys, 'schedule');
        for (const named of await namedGroupsOf(this.parts.client, keys)) total += await drainQueue(this.parts.scripts, this.parts.layout.forGroup(keys, named), 'ready');
      }
      return total;
    });
  }

  /**
   * Deletes dead letters (`'dead'`) or records of the history (`'handled'`,
   * keepHandled) of a group older than `olderThanMs`, oldest first, at most
   * `limit`. Resolves how many went.
   */
  clean(target: EventTarget, state: 'dead' | 'handled', options: CleanOptions): Promise<number> {
    const check = () => {
      checkTarget(target);
      if (state !== 'dead' && state !== 'handled') throw new InvalidArgumentError('state', `clean takes 'dead' or 'handled', got ${JSON.stringify(state) ?? String(state)}`);
      if (options === null || typeof options !== 'object') throw new InvalidArgumentError('clean options', 'give { olderThanMs, limit?, group? }');
      checkArgumentKeys(options, CLEAN_OPTION_KEYS, 'clean');
      if (options.olderThanMs === undefined) throw new InvalidArgumentError('olderThanMs', 'is required: how old (ms) a dead letter or record must be to go; 0 takes all');
      return {
        olderThanMs: checkIntegerArgument('olderThanMs', options.olderThanMs, 0, 0, MOST_AGE_MS),
        limit: checkIntegerArgument('limit', options.limit, Number.MAX_SAFE_INTEGER, 1, Number.MAX_SAFE_INTEGER),
        group: checkGroupArgument(options.group),
      };
    };
    return this.whenReady(check, async ({ olderThanMs, limit, group }) => {
      const resolved = await this.resolve(target);
      if (!resolved) return 0;
      let total = 0;
      for (const keys of resolved.queues) {
        if (total >= limit) break;
        total += await cleanQueue(this.parts.scripts, this.parts.layout.forGroup(keys, group), state, olderThanMs, limit - total);
      }
      return total;
    });
  }

  /**
   * Removes every key of the type: its partitions, groups, schedules (the
   * recurring ones too), history, limits, pause and activity counts, in
   * bounded steps, one hash slot per script. Refuses with TypeInUseError while
   * this service, or an instance instances() shows, handles it, unless `force` (the check is
   * advisory: an instance cut off, or one that starts right after, is not
   * seen). Leaves a tombstone in each queue, so that instances still running
   * do not register its groups or schedules again; a handler added afterwards
   * (addHandler), or an enqueue, starts the type again. Resolves whether
   * anything of it was stored.
   */
  obliterate(target: EventTarget, options: ObliterateOptions = {}): Promise<boolean> {
    const check = () => {
      const type = checkTarget(target);
      checkArgumentKeys(options, OBLITERATE_OPTION_KEYS, 'obliterate');
      if (options.force !== undefined && typeof options.force !== 'boolean') throw new InvalidArgumentError('force', `must be true or false, got ${String(options.force)}`);
      return { type, force: options.force === true };
    };
    return this.whenReady(check, async ({ type, force }) => {
      if (!force) {
        // This service's own handlers count at once: its answer to the question below may not be heard yet.
        if (this.parts.handledHere?.().includes(type)) throw new TypeInUseError(type, [`${hostname()} ${process.pid} (this instance)`]);
        const { instances } = await askInstances(this.parts.client, this.parts.layout.wakeChannel);
        const using = instances.filter((instance) => instance.handlers.some((handler) => handler.type === type));
        if (using.length > 0)
          throw new TypeInUseError(
            type,
            using.map((i) => `${i.host} ${i.pid} ${i.id}`),
          );
      }
      const queues = await this.everyQueueOf(target, type);
      for (const keys of queues) await obliterateQueue(this.parts.scripts, keys);
      await this.parts.scripts.bounded('obliterate', () => obliterateTypeKeys(this.parts.client, this.parts.layout, type, ACTIVITY_RETENTION_MS));
      return queues.length > 0;
    });
  }

  /** The queues of a type that hold anything: a class's partitions, those found under its name, and where its recurring schedules live. */
  private async everyQueueOf(target: EventTarget, type: string): Promise<TypeKeys[]> {
    const queues = new Map<string, TypeKeys>();
    const found = await this.stored.typeByName(type);
    for (const keys of found?.queues ?? []) queues.set(keys.tag, keys);
    const routes: EventRoute[] = [];
    if (typeof target !== 'string') routes.push(eventRouteOf(target));
    const scheduled = await this.recurring.routeOf(type);
    if (scheduled) routes.push(scheduled);
    for (const route of routes) {
      for (const keys of this.parts.layout.partitionsOf(route)) {
        if (queues.has(keys.tag)) continue;
        // A class's partition that holds nothing gets no tombstone: nothing of it is there to come back.
        if (await queueHoldsAnything(this.parts.client, keys)) queues.set(keys.tag, keys);
      }
    }
    return [...queues.values()];
  }
}
