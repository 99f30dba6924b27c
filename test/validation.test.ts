import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import {
  DelayedEvent,
  DelayedEventService,
  InvalidDelayError,
  InvalidEventError,
  InvalidOptionError,
  PayloadTooLargeError,
  SerializationError,
  ServiceClosedError,
  UnregisteredEventClassError,
  exponentialBackoff,
  fixedBackoff,
} from '../src';
import { resolveOptions } from '../src/service/service-options';
import { PaymentCheck } from './support/events';
import { useRedis } from './support/harness';

class Undecorated {
  constructor(readonly id: string) {}
}

@DelayedEvent('test.loose')
class Loose {
  [key: string]: unknown;
  constructor(readonly id: string) {}
}

/** Reads its argument in the constructor: `new Priced()`, as events are read back, throws. */
@DelayedEvent('test.priced')
class Priced {
  readonly cents: number;
  constructor(
    readonly id: string,
    price: { cents: number },
  ) {
    this.cents = price.cents;
  }
}

describe('bad input is rejected at the call with a typed error, and nothing is written', () => {
  const redis = useRedis();

  async function rejects(run: (service: ReturnType<typeof redis.service>) => Promise<unknown>, type: Function, message: RegExp) {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, maxPayloadBytes: 1_024 });
    const error = await run(service).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(type);
    expect((error as Error).message).toMatch(message);
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
  }

  it.each([
    ['negative', -1, /negative/],
    ['NaN', Number.NaN, /NaN, not a finite number/],
    ['Infinity', Number.POSITIVE_INFINITY, /Infinity, not a finite number/],
    ['a negative duration unit', { minutes: -5 }, /minutes is negative/],
    ['an unknown unit', { weeks: 1 }, /unknown duration unit 'weeks'/],
    ['over a century', { days: 40_000 }, /more than 100 years/],
  ])('delay %s', async (_name, delay, message) => {
    await rejects((s) => firstValueFrom(s.enqueueWithDelay(new PaymentCheck('x'), delay as number)), InvalidDelayError, message);
  });

  it('an invalid Date', async () => {
    await rejects((s) => firstValueFrom(s.enqueueAt(new PaymentCheck('x'), new Date('nope'))), InvalidDelayError, /valid Date/);
  });

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['a number', 42],
  ])('an id that is %s', async (_name, id) => {
    await rejects((s) => s.enqueue(new PaymentCheck(id as string), 10), InvalidEventError, /non-empty string id/);
  });

  it('a class without @DelayedEvent', async () => {
    await rejects((s) => s.enqueue(new Undecorated('u'), 10), UnregisteredEventClassError, /Undecorated has no @DelayedEvent/);
    const service = redis.service();
    expect(() => service.addHandler(Undecorated, () => true, 1)).toThrow(UnregisteredEventClassError);
  });

  it('a payload that cannot be serialized: BigInt', async () => {
    const event = new Loose('b');
    event.big = 10n;
    await rejects((s) => s.enqueue(event, 10), SerializationError, /cannot be serialized/);
  });

  it('a payload that cannot be serialized: a circular reference', async () => {
    const event = new Loose('c');
    event.self = event;
    await rejects((s) => s.enqueue(event, 10), SerializationError, /circular/);
  });

  it.each([['toString'], ['valueOf'], ['__proto__'], ['constructor']])('a payload with a key class-transformer would drop: %s', async (key) => {
    const event = new Loose('lossy');
    // JSON.parse makes own keys even of __proto__, as data from elsewhere would.
    event.nested = JSON.parse(`{"kept": 1, ${JSON.stringify(key)}: "lost"}`);
    await rejects((s) => s.enqueue(event, 10), SerializationError, new RegExp(`key event\\.nested\\.${key} would be dropped .*rename it`));
  });

  it.each([['toString'], ['valueOf']])('an event with a top-level key class-transformer would drop: %s', async (key) => {
    const event = new Loose('lossy-top');
    event[key] = 'lost';
    await rejects((s) => s.enqueue(event, 10), SerializationError, new RegExp(`key event\\.${key} would be dropped .*rename it`));
  });

  it('a payload over the size limit in bytes, though under it in characters', async () => {
    const event = new Loose('wide');
    event.blob = 'é'.repeat(600);
    await rejects((s) => s.enqueue(event, 10), PayloadTooLargeError, /over the limit of 1024 .*maxPayloadBytes/);
  });

  it('a payload over the size limit', async () => {
    const event = new Loose('big');
    event.blob = 'x'.repeat(2_000);
    await rejects((s) => s.enqueue(event, 10), PayloadTooLargeError, /over the limit of 1024 .*maxPayloadBytes/);
  });

  it('a context that is not a string map', async () => {
    await rejects((s) => s.enqueue(new PaymentCheck('x'), 10, { context: { n: 1 } as never }), InvalidEventError, /context/);
  });

  it('an event class that cannot be built without arguments, as events are read back', async () => {
    await rejects((s) => s.enqueue(new Priced('x', { cents: 5 }), 10), InvalidEventError, /Priced cannot be built without arguments .*give every constructor parameter a default/);
    const service = redis.service();
    expect(() => service.addHandler(Priced, () => true, 1)).toThrow(/Priced cannot be built without arguments/);
  });

  it('bad handler registrations', () => {
    const service = redis.service();
    expect(() => service.addHandler(PaymentCheck, () => true, 0)).toThrow(InvalidOptionError);
    expect(() => service.addHandler(PaymentCheck, () => true, 1.5)).toThrow(/parallelism/);
    expect(() => service.addHandler(PaymentCheck, () => true, 1, { timeoutMs: -1 })).toThrow(/timeoutMs/);
  });

  it('bad service options', () => {
    expect(() => redis.service({ pollIntervalMs: 0 })).toThrow(InvalidOptionError);
    expect(() => redis.service({ prefix: 'has{brace}' })).toThrow(/prefix/);
    expect(() => redis.service({ dispatchBatchSize: 100_000 })).toThrow(/dispatchBatchSize/);
  });

  // Checked on resolveOptions, the constructor's first step: were one taken, the service must not
  // go connecting to what ioredis makes of it (often Redis's default port on this host, which is not the tests' Redis).
  it.each([
    ['host:port without a scheme', '127.0.0.1:6390', /"127\.0\.0\.1:6390" is not a redis:\/\/ or rediss:\/\/ URL/],
    ['an http URL', 'http://127.0.0.1:6390', /"http:\/\/127\.0\.0\.1:6390" is not a redis:\/\/ or rediss:\/\/ URL/],
    ['a bare host name', 'localhost', /"localhost" is not a redis:\/\/ or rediss:\/\/ URL/],
    ['empty', '', /"" is not a redis:\/\/ or rediss:\/\/ URL/],
    ['a redis URL without a host', 'redis:///2', /"redis:\/\/\/2" names no host/],
    ['a socket path', '/tmp/redis.sock', /"\/tmp\/redis\.sock" is not a redis:\/\/ .*an ioredis Redis made with \{ path \} for a Unix socket/],
  ])('a redis option that is %s', (_name, url, message) => {
    let error: unknown;
    try {
      resolveOptions({ redis: url });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as Error).message).toMatch(/^Invalid option redis: /);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).toMatch(/write a URL such as redis:\/\/127\.0\.0\.1:\d+/);
  });

  it('the service refuses a redis option without a scheme before it connects, and nothing is written', async () => {
    const prefix = redis.prefix();
    let error: unknown;
    try {
      // Port 1: were the URL taken, nothing answers there.
      const service = new DelayedEventService({ redis: '127.0.0.1:1', prefix });
      await service.close();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as InvalidOptionError).code).toBe('INVALID_OPTION');
    expect((error as Error).message).toMatch(/"127\.0\.0\.1:1" is not a redis:\/\/ or rediss:\/\/ URL; write a URL such as redis:\/\/127\.0\.0\.1:\d+/);
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
  });

  it.each([['redis://127.0.0.1:6390'], ['redis://user:p%40ss@example.com:6380/2'], ['redis://:secret@example.com'], ['rediss://example.com:6390/0'], ['redis://[::1]:6390']])(
    'a redis URL %s is taken',
    (url) => {
      expect(resolveOptions({ redis: url }).redis).toBe(url);
    },
  );

  it('a bad type name on the decorator', () => {
    expect(() => DelayedEvent('has{brace}')).toThrow(/type name/);
    expect(() => DelayedEvent('')).toThrow(/type name/);
  });

  it('enqueue after close', async () => {
    const service = redis.service();
    await service.close();
    await expect(service.enqueue(new PaymentCheck('late'), 10)).rejects.toBeInstanceOf(ServiceClosedError);
  });

  it('every call after close rejects with ServiceClosedError, never an empty answer', async () => {
    const service = redis.service();
    await service.enqueue(new PaymentCheck('stored'), 60_000);
    await service.close();
    for (const [name, call] of [
      ['counts', () => service.counts(PaymentCheck)],
      ['find', () => service.find(PaymentCheck, 'stored')],
      ['list', () => service.list(PaymentCheck, 'scheduled')],
      ['types', () => service.types()],
      ['deadLetters', () => service.deadLetters(PaymentCheck)],
      ['cancel', () => service.cancel(PaymentCheck, 'stored')],
      ['pause', () => service.pause(PaymentCheck)],
      ['schedules', () => service.schedules(PaymentCheck)],
    ] as const) {
      await expect((call as () => Promise<unknown>)(), name).rejects.toBeInstanceOf(ServiceClosedError);
    }
  });

  it('durations and counts outside their documented range, and a bad prefix, are InvalidOptionErrors', () => {
    const tooLong = 2 ** 31;
    for (const option of ['handlerTimeoutMs', 'leaseGraceMs', 'closeTimeoutMs', 'commandTimeoutMs', 'pollIntervalMs', 'readerBlockMs', 'watchdogGraceMs', 'gaugeIntervalMs'] as const) {
      expect(() => resolveOptions({ redis: 'redis://127.0.0.1:1', [option]: tooLong }), option).toThrow(InvalidOptionError);
      expect(() => resolveOptions({ redis: 'redis://127.0.0.1:1', [option]: Number.POSITIVE_INFINITY }), option).toThrow(InvalidOptionError);
    }
    // Longer than an hour, a poll or a blocking read is no poll at all.
    expect(() => resolveOptions({ redis: 'redis://127.0.0.1:1', pollIntervalMs: 3_600_001 })).toThrow(/at most 3600000/);
    expect(() => resolveOptions({ redis: 'redis://127.0.0.1:1', closeTimeoutMs: 2 ** 31 - 1 })).not.toThrow();
    expect(() => resolveOptions({ redis: 'redis://127.0.0.1:1/x' })).toThrow(/database number/);
    expect(() => redis.service({ prefix: 'has space' })).toThrow(InvalidOptionError);
    expect(() => redis.service({ prefix: 123 as unknown as string })).toThrow(InvalidOptionError);
    // A retry policy past a year between attempts, or past 100,000 attempts, is no retry policy.
    expect(() => exponentialBackoff({ maxAttempts: 5, initialMs: 1_000, maxMs: 2 ** 53 })).toThrow(/option maxMs: must be a number of ms from 0 to/);
    expect(() => fixedBackoff(1_000_000, 10)).toThrow(/option maxAttempts: must be an integer from 1 to 100000/);
    expect(() => fixedBackoff(3, Number.POSITIVE_INFINITY)).toThrow(InvalidOptionError);
    const service = redis.service();
    expect(() => service.addHandler(PaymentCheck, () => true, 1, { timeoutMs: tooLong })).toThrow(InvalidOptionError);
  });

  // A Cluster has database 0 alone, and takes no database in its URLs.
  it.skipIf(redis.topology === 'cluster')('a database Redis does not have stops every connection of the service, is named, and nothing is written to database 0', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ redis: `${redis.server.url}/99`, prefix });
    await expect(service.enqueue(new PaymentCheck('p-1', 1), 0)).rejects.toThrow(/no database 99/);
    // The handlers' connection is opened now, after the refusal: it must not go on in database 0 either
    // (a named group's registration would be its first write).
    service.addHandler(PaymentCheck, () => true, 1, { group: 'audit' });
    await expect(service.waitUntilReady()).rejects.toThrow(/no database 99/);
    await expect(service.enqueue(new PaymentCheck('p-2', 1), 0)).rejects.toThrow(/no database 99/);
    // A window in which nothing may be written.
    const until = Date.now() + 1_000;
    while (Date.now() < until) {
      expect(await redis.client().keys(`${prefix}*`)).toEqual([]);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
});
