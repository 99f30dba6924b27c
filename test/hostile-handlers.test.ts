import { throwError } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ContextProviderError, PermanentFailure, fixedBackoff } from '../src';
import { boundErrorText } from '../src/core/errors';
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

/** Hooks and loggers are user code too: whatever they throw, the process goes on, and what they wrap is not lost. */
describe('hooks and loggers that throw cannot take the process down either', () => {
  const redis = useRedis();
  const escaped: unknown[] = [];
  const onEscape = (error: unknown) => escaped.push(error);
  beforeEach(() => {
    escaped.length = 0;
    process.on('unhandledRejection', onEscape);
    process.on('uncaughtException', onEscape);
  });
  afterEach(() => {
    process.off('unhandledRejection', onEscape);
    process.off('uncaughtException', onEscape);
  });

  it('a logger whose methods throw: events are still handled and dead-lettered', async () => {
    const thrower = () => {
      throw booby();
    };
    const service = redis.service({ retry: fixedBackoff(1, 0), logger: { warn: thrower, error: thrower } });
    const handled: string[] = [];
    service.addHandler(
      WorkItem,
      (event) => {
        if (event.id === 'declined') throw new PermanentFailure('declined');
        handled.push(event.id);
      },
      1,
    );
    await service.enqueue(new WorkItem('declined'), 0);
    await service.enqueue(new WorkItem('fine'), 0);
    // The dead letter is logged (and the logger throws): the event is dead-lettered all the same.
    await waitFor(async () => (await service.deadLetters(WorkItem)).length === 1 && handled.includes('fine'), 'both ended');
    expect(escaped).toEqual([]);
  });

  it('a contextHandler that throws: the call fails, and the event is retried at once', async () => {
    const ran: number[] = [];
    const service = redis.service({
      handlerTimeoutMs: 60_000,
      leaseGraceMs: 60_000,
      retry: fixedBackoff(3, 0),
      logger: false,
      contextHandler: (_context, delivery, next) => {
        if (delivery.attempt === 1) throw booby();
        return next();
      },
    });
    service.addHandler(WorkItem, (_event, _context, delivery) => void ran.push(delivery.attempt), 1);
    await service.enqueue(new WorkItem('wrapped'), 0);
    await waitFor(async () => ran.includes(2) && (await service.find(WorkItem, 'wrapped')) === undefined, 'handled on its retry');
    expect(ran).toEqual([2]);
    expect(escaped).toEqual([]);
  });

  it('a contextProvider that throws: the enqueue fails with ContextProviderError, and nothing is stored', async () => {
    const service = redis.service({
      logger: false,
      contextProvider: () => {
        throw booby();
      },
    });
    const error = await service.enqueue(new WorkItem('no-context'), 0).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ContextProviderError);
    expect((error as Error).message).toMatch(/contextProvider option threw \(unprintable error\)/);
    expect(await service.find(WorkItem, 'no-context')).toBeUndefined();
    // A context given with the call needs no provider.
    expect(await service.enqueue(new WorkItem('with-context'), 0, { context: { traceId: 't' } })).toBe('scheduled');
    expect(escaped).toEqual([]);
  });

  it('enqueue instrumentation that throws, or whose scope throws, never fails an enqueue', async () => {
    const hostileScopes = [
      () => {
        throw booby();
      },
      () => booby(),
      () => ({
        capture: () => {
          throw booby();
        },
        end: () => {
          throw booby();
        },
      }),
    ];
    for (const [i, instrument] of hostileScopes.entries()) {
      const service = redis.service({ logger: false, instrumentEnqueue: instrument as never });
      expect(await service.enqueue(new WorkItem(`instrumented-${i}`), 60_000)).toBe('scheduled');
      expect((await service.find(WorkItem, `instrumented-${i}`))?.state).toBe('scheduled');
    }
    expect(escaped).toEqual([]);
  });
  it('a 5 MB error message is stored, listed and logged cut to 8 KiB on a character boundary, saying how much was cut', async () => {
    const prefix = redis.prefix();
    const logged: string[] = [];
    const service = redis.service({
      prefix,
      retry: fixedBackoff(3, 0),
      logger: { warn: (fields) => void logged.push(String((fields as { error?: unknown }).error ?? '')), error: () => undefined },
    });
    // Two-byte characters: a cut by bytes alone would split one.
    const huge = `é${'ü'.repeat(2_621_440)}`;
    service.addHandler(WorkItem, () => {
      throw new Error(huge);
    });
    await service.enqueue(new WorkItem('huge'), 0);
    await waitFor(async () => (await service.deadLetters(WorkItem)).length === 1, 'dead-lettered after 3 attempts', 20_000);
    const client = redis.client();
    const base = `${prefix}:{test.work}`;
    const last = (await client.hget(`${base}:e`, 'huge'))!;
    expect(Buffer.byteLength(last)).toBeLessThanOrEqual(8_192);
    expect(last).toMatch(/^Error: éü+… \(\d+ bytes cut\) \(attempt 3 of 3\)$/);
    expect(last).not.toContain('\ufffd');
    // Three attempts in the error log: about 3 x 8 KiB, not 15 MB.
    expect(Buffer.byteLength((await client.hget(`${base}:el`, 'huge'))!)).toBeLessThan(3 * 8_192 + 1_000);
    const [listed] = await service.deadLetters(WorkItem);
    expect(Buffer.byteLength(listed!.error)).toBeLessThanOrEqual(8_192);
    await waitFor(() => logged.some((e) => e.includes('bytes cut')), 'the dead letter logged');
    expect(Math.max(...logged.map((e) => Buffer.byteLength(e)))).toBeLessThanOrEqual(8_192);
    expect(boundErrorText('short')).toBe('short');
    const cut = boundErrorText('€'.repeat(10_000));
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(8_192);
    expect(cut).toMatch(/^€+… \(\d+ bytes cut\)$/);
    expect(Buffer.byteLength(cut.slice(0, cut.indexOf('…'))) + Number(/\((\d+) bytes cut/.exec(cut)![1])).toBe(30_000);
  });
});
