import { randomInt } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { RedisClient } from './redis-client';

/** A handler an instance runs, as it answered. */
export interface InstanceHandler {
  readonly type: string;
  readonly group: string;
  readonly parallelism: number;
  /** Handler calls running when it answered. */
  readonly running: number;
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

/** How long instances() waits for answers at most. */
const ANSWER_WAIT_MS = 1_000;

function replyChannel(prefix: string, question: number): string {
  return `${prefix}:instances:${question}`;
}

/**
 * Who is there, without a key: the asker subscribes to a reply channel of
 * its own and publishes a question on the wake-up channel, which every
 * instance handling events listens to (one connection each); each answers on
 * the reply channel with what it runs. An instance that crashed, stopped or
 * was cut off answers nothing, so only live instances are listed, and nothing
 * is left in Redis to expire. On a single server PUBLISH says how many
 * listen, and the wait ends with the last answer; a Cluster counts only the
 * node it published to, so there the wait is ANSWER_WAIT_MS.
 */
export async function askInstances(client: RedisClient, prefix: string, wakeChannel: string): Promise<InstanceInfo[]> {
  const question = randomInt(1, 2 ** 47);
  const channel = replyChannel(prefix, question);
  // A subscriber of its own, with an offline queue: it only listens, and the subscription waits for the connection.
  const listener = client.isCluster ? (client as Cluster).duplicate() : (client as Redis).duplicate({ enableOfflineQueue: true });
  const answers = new Map<string, InstanceInfo>();
  try {
    let expected = Number.POSITIVE_INFINITY;
    let done: () => void = () => undefined;
    const finished = new Promise<void>((resolve) => {
      done = resolve;
      const timer = setTimeout(resolve, ANSWER_WAIT_MS);
      timer.unref();
    });
    listener.on('message', (from: string, message: string) => {
      if (from !== channel) return;
      try {
        const answer = JSON.parse(message) as InstanceAnswer;
        answers.set(answer.id, {
          id: answer.id,
          host: answer.host,
          pid: answer.pid,
          startedAt: new Date(answer.startedAt),
          lastSeen: new Date(),
          handlers: answer.handlers,
        });
      } catch {
        // Not an answer this version sends: not listed.
      }
      if (answers.size >= expected) done();
    });
    listener.on('error', () => undefined);
    await listener.subscribe(channel);
    const listening = await client.publish(wakeChannel, `${INSTANCES_QUESTION}|${question}`);
    if (!client.isCluster) expected = listening;
    if (answers.size >= expected) done();
    await finished;
  } finally {
    listener.disconnect();
  }
  return [...answers.values()].sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime() || (a.id < b.id ? -1 : 1));
}

/** Answers a question of askInstances() (its number came with the wake-up). */
export async function answerInstances(client: RedisClient, prefix: string, question: number, answer: InstanceAnswer): Promise<void> {
  await client.publish(replyChannel(prefix, question), JSON.stringify(answer));
}
