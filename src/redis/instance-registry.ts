import { randomInt } from 'node:crypto';
import { RedisConnectionError } from '../core/errors';
import type { Cluster, Redis } from 'ioredis';
import type { RedisClient } from './redis-client';
import { whenReady } from './ready-gate';

/** A handler an instance runs, as it answered. */
export interface InstanceHandler {
  readonly type: string;
  readonly group: string;
  readonly parallelism: number;
  /** Handler calls running when it answered. */
  readonly running: number;
  /** The event class's version it reads up to; absent for version 1. */
  readonly version?: number;
}

/** A live service instance under the prefix, as it answered instances(). */
export interface InstanceInfo {
  /** Random, chosen when the service was constructed. */
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly startedAt: Date;
  /** When it answered: now. */
  readonly lastSeen: Date;
  readonly handlers: readonly InstanceHandler[];
}

/** What an instance answers, as sent: plain JSON, times in ms. */
export interface InstanceAnswer {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly startedAt: number;
  readonly handlers: readonly InstanceHandler[];
}

/**
 * The tag of the question on the wake-up channel: no queue's tag starts with
 * '#' (a type name holds none), so no dispatcher or reader takes it for a wake-up.
 */
export const INSTANCES_QUESTION = '#instances';

/** How an answer starts on the wake-up channel; dispatchers and readers ignore it as they do the question. */
export const INSTANCES_ANSWER = '#instances-answer';

/** How long instances() waits for answers at most: on a single server it ends with the last one expected. */
const ANSWER_WAIT_MS = 1_000;
/** On a Cluster, where how many listen is unknown, the wait: answers arrive within milliseconds of the question. */
const CLUSTER_ANSWER_WAIT_MS = 300;

/**
 * Who is there, without a key: the asker listens on the wake-up channel, which
 * every instance handling events listens to (one connection each), and
 * publishes a question there; each instance answers on the same channel with
 * what it runs. One channel, so the ACL the README documents (`&<prefix>:wake`)
 * is all it takes. An instance that crashed, stopped or was cut off answers
 * nothing, so only live instances are listed, and nothing is left in Redis to
 * expire. On a single server PUBLISH says how many listen (the asker among
 * them), and the wait ends with the last answer; a Cluster counts only the
 * node it published to, so there the wait is CLUSTER_ANSWER_WAIT_MS.
 */
export async function askInstances(client: RedisClient, wakeChannel: string): Promise<{ instances: InstanceInfo[]; dropped: number }> {
  const question = randomInt(1, 2 ** 47);
  const answerStart = `${INSTANCES_ANSWER}|${question}|`;
  // A subscriber of its own, with an offline queue: it only listens, and the subscription waits for the connection.
  const listener = client.isCluster ? (client as Cluster).duplicate() : (client as Redis).duplicate({ enableOfflineQueue: true });
  const answers = new Map<string, InstanceInfo>();
  let dropped = 0;
  try {
    let expected = Number.POSITIVE_INFINITY;
    let done: () => void = () => undefined;
    listener.on('message', (from: string, message: string) => {
      if (from !== wakeChannel || !message.startsWith(answerStart)) return;
      const answer = validAnswer(message.slice(answerStart.length));
      // Not an answer as instances send them (malformed, crafted, or from another version): not listed.
      // The first answer of an id stands: a crafted one cannot replace a real instance's.
      if (answer && !answers.has(answer.id)) answers.set(answer.id, answer);
      else dropped++;
      if (answers.size >= expected) done();
    });
    listener.on('error', () => undefined);
    // The subscription gets a bound of its own: a caller's client that retries for ever must not hang here.
    let subscribeTimer: NodeJS.Timeout | undefined;
    await Promise.race([
      listener.subscribe(wakeChannel).finally(() => clearTimeout(subscribeTimer)),
      new Promise((_, reject) => {
        subscribeTimer = setTimeout(() => reject(new RedisConnectionError('timeout', 'instances(): the subscription to the wake-up channel got no answer within 2 s')), 2_000);
        subscribeTimer.unref();
      }),
    ]);
    // The wait for answers starts once the question can be heard back.
    const finished = new Promise<void>((resolve) => {
      done = resolve;
      const timer = setTimeout(resolve, client.isCluster ? CLUSTER_ANSWER_WAIT_MS : ANSWER_WAIT_MS);
      timer.unref();
    });
    const listening = await client.publish(wakeChannel, `${INSTANCES_QUESTION}|${question}`);
    // The asker's own listener is one of those who heard it.
    if (!client.isCluster) expected = listening - 1;
    if (answers.size >= expected) done();
    await finished;
  } finally {
    listener.disconnect();
  }
  const instances = [...answers.values()].sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime() || (a.id < b.id ? -1 : 1));
  return { instances, dropped };
}

/** Characters a terminal or a page would act on rather than show: controls, and the ones that reorder text. */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** A string from an answer, its unsafe characters written as \uXXXX; undefined when it is none or too long. */
function safeString(value: unknown, most: number): string | undefined {
  if (typeof value !== 'string' || value.length > most) return undefined;
  return value.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function count(value: unknown, least: number, most: number): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= least && value <= most ? value : undefined;
}

/**
 * An answer checked against what instances send (InstanceAnswer): anyone who
 * may publish on the channel can answer, so each field is checked and each
 * string made safe to print. Undefined for anything else.
 */
function validAnswer(json: string): InstanceInfo | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const answer = raw as Record<string, unknown>;
  const id = typeof answer.id === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(answer.id) ? answer.id : undefined;
  const host = safeString(answer.host, 255);
  const pid = count(answer.pid, 0, 2 ** 32);
  const startedAt = count(answer.startedAt, 1, Date.now() + 86_400_000);
  if (id === undefined || host === undefined || pid === undefined || startedAt === undefined) return undefined;
  if (!Array.isArray(answer.handlers) || answer.handlers.length > 10_000) return undefined;
  const handlers: InstanceHandler[] = [];
  for (const h of answer.handlers as unknown[]) {
    if (typeof h !== 'object' || h === null) return undefined;
    const handler = h as Record<string, unknown>;
    const type = safeString(handler.type, 512);
    const group = safeString(handler.group, 64);
    const parallelism = count(handler.parallelism, 1, 1_000_000);
    const running = count(handler.running, 0, 1_000_000);
    const version = handler.version === undefined ? undefined : count(handler.version, 1, 1_000_000);
    if (type === undefined || group === undefined || parallelism === undefined || running === undefined) return undefined;
    if (handler.version !== undefined && version === undefined) return undefined;
    handlers.push({ type, group, parallelism, running, ...(version !== undefined ? { version } : {}) });
  }
  return { id, host, pid, startedAt: new Date(startedAt), lastSeen: new Date(), handlers };
}

/** Answers a question of askInstances() (its number came with the wake-up), on the wake-up channel. */
export async function answerInstances(client: RedisClient, wakeChannel: string, question: number, answer: InstanceAnswer): Promise<void> {
  await client.publish(wakeChannel, `${INSTANCES_ANSWER}|${question}|${JSON.stringify(answer)}`);
}

/**
 * Tells every instance's readers of a queue to look now, as a dispatcher
 * does when it moved events there (`<queue tag>|-1` on the wake-up channel):
 * a reader left events for a newer class version, which readers of that
 * version take from first. A lost message costs only their next poll.
 */
export async function announceReady(client: RedisClient, wakeChannel: string, queueTag: string): Promise<void> {
  await client.publish(wakeChannel, `${queueTag}|-1`);
}

/**
 * How a beacon's tag starts on the wake-up channel (since 0.6): '#alive:<instance id>|<sequence number>'.
 * Dispatchers and readers, of 0.5 too, ignore it as they do the question.
 */
export const BEACON_TAG = '#alive:';

/**
 * Every instance's dispatchers of a queue look now (a due of 0: a named
 * group's own dispatchers too): a handler stopped here, and what only its
 * dispatcher knew the time of (a retry, an abandoned call's lease) is theirs.
 */
export async function announceLook(client: RedisClient, wakeChannel: string, queueTag: string): Promise<void> {
  await client.publish(wakeChannel, `${queueTag}|0`);
}

/**
 * How long a beacon waits for its connection to be up: the first goes the
 * moment it is, ahead of the first claim (a slow start of a Cluster client
 * would otherwise leave an instance that dies early unheard).
 */
const BEACON_READY_WAIT_MS = 30_000;

/** An instance that handles events says it is alive (src/runtime/instance-beacon.ts), once `client` is up; `seq` numbers its beacons. */
export async function announceAlive(client: RedisClient, wakeChannel: string, instanceId: string, seq: number): Promise<void> {
  await whenReady(client, BEACON_READY_WAIT_MS);
  await client.publish(wakeChannel, `${BEACON_TAG}${instanceId}|${seq}`);
}
