import { throwError } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { fixedBackoff } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/** A value whose every trap throws: looking at it in any way fails. */
function booby(): object {
  const boom = () => {
    throw new Error('trap');
  };
  return new Proxy({}, { get: boom, has: boom, getPrototypeOf: boom, ownKeys: boom, getOwnPropertyDescriptor: boom, apply: boom });
}

/** An Error whose message and name getters throw. */
function errorWithThrowingMessage(): Error {
  const error = new Error('x');
  Object.defineProperty(error, 'message', {
    get: () => {
      throw new Error('message getter');
    },
  });
  Object.defineProperty(error, 'name', {
    get: () => {
      throw new Error('name getter');
    },
  });
  return error;
}

const hostile: Record<string, () => unknown> = {
  'rejects with an Error whose message getter throws': () => Promise.reject(errorWithThrowingMessage()),
  'rejects with a Proxy whose traps throw': () => Promise.reject(booby()),
  'throws a Proxy whose traps throw': () => {
    throw booby();
  },
  'throws an Error whose message getter throws': () => {
    throw errorWithThrowingMessage();
  },
  'returns a thenable whose then() throws': () => ({
    then() {
      throw booby();
    },
  }),
  'returns a Proxy whose traps throw': () => booby(),
  'errors an Observable with a Proxy whose traps throw': () => throwError(() => booby()),
};

/**
 * Whatever a handler throws, rejects or errors with, the process keeps
 * running, the call counts as a failure with a readable reason, and the event
 * moves on to its retry at once, never waiting out its lease.
 */
describe('user code cannot take the process down', () => {
  const redis = useRedis();

  for (const [what, answer] of Object.entries(hostile)) {
    it(`a handler that ${what}: the process survives and the event is retried at once`, async () => {
      const escaped: unknown[] = [];
      const onEscape = (error: unknown) => escaped.push(error);
      process.on('unhandledRejection', onEscape);
      process.on('uncaughtException', onEscape);
      try {
        // Leases far longer than the test: only a recorded failure brings the retry in time.
        const service = redis.service({ handlerTimeoutMs: 60_000, leaseGraceMs: 60_000, retry: fixedBackoff(3, 0), logger: false });
        const attempts: number[] = [];
        service.addHandler(
          WorkItem,
          ((_event: WorkItem, _context: unknown, delivery: { attempt: number }) => {
            attempts.push(delivery.attempt);
            return delivery.attempt === 1 ? answer() : true;
          }) as never,
          1,
        );
        await service.enqueue(new WorkItem('target'), 0);
        await waitFor(() => attempts.includes(2), 'the retry', 10_000);
        await waitFor(async () => (await service.find(WorkItem, 'target')) === undefined, 'the event completed on its retry');
        expect(attempts).toEqual([1, 2]);
        expect(escaped).toEqual([]);
      } finally {
        process.off('unhandledRejection', onEscape);
        process.off('uncaughtException', onEscape);
      }
    });
  }

  it("records a readable reason, or 'unprintable error', as the event's error", async () => {
    const service = redis.service({ handlerTimeoutMs: 60_000, retry: fixedBackoff(1, 0), logger: false });
    service.addHandler(WorkItem, ((event: WorkItem) => (event.id === 'proxy' ? Promise.reject(booby()) : Promise.reject(errorWithThrowingMessage()))) as never, 2);
    await service.enqueue(new WorkItem('proxy'), 0);
    await service.enqueue(new WorkItem('getter'), 0);
    await waitFor(async () => (await service.deadLetters(WorkItem)).length === 2, 'both dead-lettered');
    for (const letter of await service.deadLetters(WorkItem)) expect(letter.error).toMatch(/^unprintable error/);
  });
});
