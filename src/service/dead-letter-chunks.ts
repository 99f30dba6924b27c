import type { DeadLetterStep } from '../redis/lua-scripts';
import type { TypeKeys } from '../redis/redis-layout';
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
