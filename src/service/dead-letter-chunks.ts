import type { EventRoute } from '../core/delayed-event.decorator';
import type { DeadLetterStep, LuaScripts } from '../redis/lua-scripts';
import type { RedisLayout, TypeKeys } from '../redis/redis-layout';
import { DEAD_LETTER_CHUNK } from './inspection-types';

/** On the given ids, or on all (oldest first), in chunks: a long list or a huge dead-letter set never holds Redis in one script. */
export async function applyInChunks(keys: TypeKeys, ids: readonly string[] | undefined, step: (keys: TypeKeys, ids: readonly string[], limit: number) => Promise<DeadLetterStep>): Promise<number> {
  let total = 0;
  if (ids) {
    for (let from = 0; from < ids.length; from += DEAD_LETTER_CHUNK) {
      const chunk = ids.slice(from, from + DEAD_LETTER_CHUNK);
      total += (await step(keys, chunk, chunk.length)).done;
    }
    return total;
  }
  for (;;) {
    const { done, taken } = await step(keys, [], DEAD_LETTER_CHUNK);
    total += done;
    if (taken < DEAD_LETTER_CHUNK) return total;
  }
}

/**
 * The queues a replay or purge acts on, each with the ids given that live
 * there (undefined: all of its dead letters). For a class, an id's partition
 * is known; for a type name, each partition found takes every id given (one
 * stored elsewhere is not in its set and is skipped).
 */
export function idsByQueue(
  layout: RedisLayout,
  route: EventRoute,
  queues: readonly TypeKeys[],
  exact: boolean,
  ids: readonly string[] | undefined,
): Array<{ keys: TypeKeys; ids: string[] | undefined }> {
  const byQueue = new Map<string, { keys: TypeKeys; ids: string[] | undefined }>();
  if (!ids || !exact) {
    for (const keys of queues) byQueue.set(keys.tag, { keys, ids: ids && [...ids] });
    return [...byQueue.values()];
  }
  for (const id of ids) {
    const keys = layout.forEvent(route, id);
    const queue = byQueue.get(keys.tag);
    if (queue) queue.ids!.push(id);
    else byQueue.set(keys.tag, { keys, ids: [id] });
  }
  return [...byQueue.values()];
}

/** Removes a group from a queue, with what waited for it, in calls of DEAD_LETTER_CHUNK events; resolves whether it was registered. */
export async function removeGroupInChunks(scripts: LuaScripts, shared: TypeKeys, group: string): Promise<boolean> {
  let first: boolean | undefined;
  for (;;) {
    const { existed, left } = await scripts.removeGroup(shared, group, DEAD_LETTER_CHUNK);
    first ??= existed;
    if (left === 0) return first;
  }
}
