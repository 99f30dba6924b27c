import { NotReplicatedError } from '../core/errors';
import type { CallDeadlines } from './call-deadlines';
import { LUA_SOURCES } from './lua-sources.generated';
import type { RedisClient } from './redis-client';
import { type LoadedScript, followRedirection, isCluster, isMissingScript, isRedirection } from './script-calls';
import { type Durability, type EnqueuePolicy, PLAIN_POLICY, REPLACE_POLICY, type ScheduledBody } from './script-results';

/** An enqueue's policy; `true` replaces, `false` leaves stored events as they are. */
export function policyOf(how: EnqueuePolicy | boolean): EnqueuePolicy {
  return typeof how === 'boolean' ? (how ? REPLACE_POLICY : PLAIN_POLICY) : how;
}

/** The arguments of one lua/enqueue.lua call: its keys, then what its header declares (the generated encoder places them). */
export function enqueueArguments(keyArgs: readonly string[], policy: EnqueuePolicy, wakeChannel: string, tag: string, events: ReadonlyArray<ScheduledBody>): Array<string | number> {
  // Events of one call mostly share a delay: its argument is built once.
  let lastDelay = -1;
  let delayArg = '';
  const sentAt = performance.now();
  const entries = events.map((e) => {
    if (!('delayMs' in e.due)) return { id: e.id, body: e.body, due: String(e.due.atMs) };
    const delay = Math.max(0, Math.round(e.due.delayMs - (sentAt - e.requestedAt)));
    if (delay !== lastDelay) {
      lastDelay = delay;
      delayArg = `+${delay}`;
    }
    return { id: e.id, body: e.body, due: delayArg };
  });
  return LUA_SOURCES.enqueue.encode({ mode: policy.mode, modeMs: policy.ms, wakeChannel, wakeTag: tag, events: entries }, keyArgs.slice());
}

/**
 * An enqueue followed by a WAIT in the same pipeline (so on a cluster it
 * reaches the node that took the write): its statuses, or a
 * NotReplicatedError when too few replicas confirmed in time.
 */
export async function enqueueDurably(
  client: RedisClient,
  enqueue: LoadedScript,
  args: ReadonlyArray<string | number>,
  numberOfKeys: number,
  durability: Durability,
  deadlines: CallDeadlines,
): Promise<unknown> {
  const storeAndWait = (loaded: boolean) => {
    const pipeline = client.pipeline();
    if (loaded) pipeline.evalsha(enqueue.sha, numberOfKeys, ...args);
    else pipeline.eval(enqueue.lua, numberOfKeys, ...args);
    pipeline.wait(durability.replicas, durability.timeoutMs);
    return deadlines.bound(pipeline.exec(), 'enqueue+wait', deadlines.defaultMs + durability.timeoutMs);
  };
  let [stored, waited] = (await storeAndWait(true)) ?? [];
  // A script Redis did not hold stored nothing: sending it whole again is safe.
  if (stored && isMissingScript(stored[0])) [stored, waited] = (await storeAndWait(false)) ?? [];
  // ioredis follows a redirection for a pipeline only when every command got
  // it; WAIT, which names no key, does not. A redirected script ran nowhere,
  // so it is sent again once the slot map says where its slot lives now.
  for (let redirections = 0; stored && isRedirection(stored[0]) && isCluster(client); redirections++) {
    if (redirections >= (client.options.maxRedirections ?? 16)) throw stored[0];
    await followRedirection(client, stored[0]);
    [stored, waited] = (await storeAndWait(true)) ?? [];
    if (stored && isMissingScript(stored[0])) [stored, waited] = (await storeAndWait(false)) ?? [];
  }
  if (!stored || stored[0]) throw stored?.[0] ?? new Error('enqueue got no reply');
  if (!waited || waited[0]) throw waited?.[0] ?? new Error('WAIT got no reply');
  const acknowledged = Number(waited[1]);
  if (acknowledged < durability.replicas) throw new NotReplicatedError(acknowledged, durability.replicas, durability.timeoutMs);
  // The script's reply as Redis sent it: the caller decodes it (lua/enqueue.lua, REPLY).
  return stored[1];
}
