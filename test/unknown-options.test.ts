import 'reflect-metadata';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, DelayedEventService, InvalidArgumentError, InvalidOptionError, createInspector, exponentialBackoff } from '../src';
import { createDashboard } from '../src/dashboard';
import { DelayedEventsModule, OnDelayedEvent } from '../src/integrations/nestjs';
import { openTelemetry } from '../src/integrations/opentelemetry';
import { registerPrometheusMetrics } from '../src/integrations/prometheus';
import { PaymentCheck } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/** What `call` threw, or undefined. */
function thrown(call: () => unknown): unknown {
  try {
    call();
  } catch (error) {
    return error;
  }
  return undefined;
}

/** What `call` rejected (or threw) with, or undefined. */
async function rejected(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (error) {
    return error;
  }
  return undefined;
}

/**
 * Every options object whose keys the library defines refuses a key it does
 * not know, even one set to undefined: a misspelt option would otherwise do
 * nothing and nobody would know. The error names the key, the one it likely
 * misspells and every key allowed; nothing is stored.
 */
describe('unknown option keys are refused, saying which and what is allowed', () => {
  const redis = useRedis();

  it('in the options of calls: InvalidArgumentError, and nothing stored', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const event = new PaymentCheck('p1');
    const calls: Record<string, () => Promise<unknown>> = {
      'enqueue { priorty }': () => service.enqueue(event, 0, { priorty: 1 } as never),
      'enqueue { replce: undefined }': () => service.enqueue(event, 0, { replce: undefined } as never),
      'enqueueWithDelay { aftr }': () => firstValueFrom(service.enqueueWithDelay(event, 0, { aftr: ['x'] } as never)),
      'enqueue after entry { idd }': () => service.enqueue(event, 0, { after: [{ type: PaymentCheck, idd: 'x' }] } as never),
      'enqueueFlow { childern }': () => service.enqueueFlow({ event, childern: [] } as never),
      'enqueueFlow child { onChildFailre }': () => service.enqueueFlow({ event, children: [{ event: new PaymentCheck('p2'), onChildFailre: 'ignore' }] } as never),
      'cancel { cascde }': () => service.cancel(PaymentCheck, 'p1', { cascde: false } as never),
      'enqueueAt { debounse }': () => firstValueFrom(service.enqueueAt(event, new Date(), { debounse: {} } as never)),
      'enqueue debounce { maxWait }': () => service.enqueue(event, 0, { debounce: { maxWait: 5 } } as never),
      'enqueue throttle { window }': () => service.enqueue(event, 0, { throttle: { window: 5, windowMs: 5 } } as never),
      'enqueue dedupe { keeplast }': () => service.enqueue(event, 0, { dedupe: { windowMs: 5, keeplast: true } } as never),
      'enqueueMany entry debounce { lead }': () => service.enqueueMany([{ event, debounce: { lead: true } } as never]),
      'enqueueBatch entry { priorty }': () => firstValueFrom(service.enqueueBatch([{ event, delay: 0, priorty: 2 } as never])),
      'enqueueBatch { replce }': () => firstValueFrom(service.enqueueBatch([{ event }], { replce: true } as never)),
      'schedule { overlapp }': () => service.schedule('tick', new PaymentCheck(''), { every: 1_000 }, { overlapp: 'skip' } as never),
      'backfill { form }': () => service.backfill(PaymentCheck, 'tick', { form: new Date(0), to: new Date(1) } as never),
      'schedule spec { evry }': () => service.schedule('tick', new PaymentCheck(''), { every: 1_000, evry: 5 } as never),
      'schedule spec { timezone } beside cron': () => service.schedule('tick', new PaymentCheck(''), { cron: '* * * * *', timezone: 'UTC' } as never),
      'list { limt }': () => service.list(PaymentCheck, 'scheduled', { limt: 5 } as never),
      'deadLetters { ofset }': () => service.deadLetters(PaymentCheck, { ofset: 1 } as never),
      'dueTimeline { slot }': () => service.dueTimeline(PaymentCheck, { slot: 5 } as never),
      'replayDeadLetters { grop }': () => service.replayDeadLetters(PaymentCheck, undefined, { grop: 'billing' } as never),
      'purgeDeadLetters { grop }': () => service.purgeDeadLetters(PaymentCheck, undefined, { grop: 'billing' } as never),
      'drain { grop }': () => service.drain(PaymentCheck, { grop: 'billing' } as never),
      'clean { olderThan }': () => service.clean(PaymentCheck, 'dead', { olderThan: 5, olderThanMs: 0 } as never),
      'obliterate { forse }': () => service.obliterate(PaymentCheck, { forse: true } as never),
      'enqueueMany entry { priorty }': () => service.enqueueMany([{ event, delay: 0, priorty: 2 } as never]),
      'enqueueMany { replce }': () => service.enqueueMany([{ event }], { replce: true } as never),
      'verifyStored { limitt }': () => service.verifyStored(PaymentCheck, { limitt: 5 } as never),
      'health { timeout }': () => service.health({ timeout: 5 } as never),
      'waitUntilReady { timeout }': () => service.waitUntilReady({ timeout: 5 } as never),
    };
    for (const [name, call] of Object.entries(calls)) {
      const error = await rejected(call);
      expect(error, name).toBeInstanceOf(InvalidArgumentError);
      const key = /\{ (\w+)/.exec(name)![1]!;
      expect((error as Error).message, name).toContain(`"${key}"`);
      expect((error as Error).message, name).toMatch(/options are /);
    }
    const misspelt = (await rejected(() => service.enqueue(event, 0, { priorty: 1 } as never))) as Error;
    // Since 0.6 enqueue has a priority: the misspelling is named, and so is what it likely means.
    expect(misspelt.message).toContain('enqueue has no option "priorty" (did you mean priority?); its options are context, replace, maxAttempts, priority, debounce, throttle, dedupe');
    expect((await rejected(() => service.enqueue(event, 0, { replce: true } as never))) as Error).toHaveProperty('message', expect.stringContaining('(did you mean replace?)'));
    // Nothing was stored by any of them.
    expect(await redis.client().keys(`${prefix}:*`)).toEqual([]);
    expect(await service.schedules(PaymentCheck)).toEqual([]);

    const inspector = createInspector({ redis: redis.connection(), prefix });
    try {
      expect(await rejected(() => inspector.list('test.payment-check', 'dead', { grup: 'x' } as never))).toBeInstanceOf(InvalidArgumentError);
      expect(await rejected(() => inspector.health({ timeoutMS: 5 } as never))).toBeInstanceOf(InvalidArgumentError);
    } finally {
      await inspector.close();
    }
  });

  it('in the options of constructors, handlers, decorators and tools: InvalidOptionError', () => {
    const url = redis.connection();
    const cases: Record<string, () => unknown> = {
      'DelayedEventService { pollIntervalMS }': () => new DelayedEventService({ redis: url, pollIntervalMS: 5 } as never),
      'DelayedEventService { prefx: undefined }': () => new DelayedEventService({ redis: url, prefx: undefined } as never),
      'keepHandled { foo }': () => new DelayedEventService({ redis: url, keepHandled: { foo: 1 } } as never),
      'keepDead { cont }': () => new DelayedEventService({ redis: url, keepDead: { cont: 1 } } as never),
      'durableEnqueue { replica }': () => new DelayedEventService({ redis: url, durableEnqueue: { replica: 1 } } as never),
      'createInspector { prefx }': () => createInspector({ redis: url, prefx: 'x' } as never),
      'exponentialBackoff { initialMS }': () => exponentialBackoff({ maxAttempts: 3, initialMs: 10, initialMS: 5 } as never),
      '@DelayedEvent { partition }': () => DelayedEvent('test.misspelt', { partition: 4 } as never),
      'createDashboard { readonly }': () => createDashboard(createInspector({ redis: url }), { readonly: true } as never),
      'openTelemetry { parnet }': () => openTelemetry({ parnet: 'parent' } as never),
      '@OnDelayedEvent { prefech }': () => OnDelayedEvent(PaymentCheck, { prefech: 0 } as never),
      'DelayedEventsModule.forRootAsync { useFactroy }': () => DelayedEventsModule.forRootAsync({ useFactory: () => ({ redis: url }), useFactroy: 1 } as never),
    };
    for (const [name, call] of Object.entries(cases)) {
      const error = thrown(call);
      expect(error, name).toBeInstanceOf(InvalidOptionError);
      const key = /\{ (\w+)/.exec(name)![1]!;
      expect((error as Error).message, name).toContain(`"${key}"`);
    }
    expect((thrown(() => new DelayedEventService({ redis: url, pollIntervalMS: 5 } as never)) as Error).message).toContain('(did you mean pollIntervalMs?)');
    // The dashboard's auth is one of two shapes, with nothing beside it.
    for (const auth of [{ tokn: 'x'.repeat(20) }, { token: 'x'.repeat(20), basic: { username: 'a', password: 'b' } }, { basic: { username: 'a', password: 'b', pasword: 'c' } }]) {
      expect(thrown(() => createDashboard(createInspector({ redis: url }), { auth } as never))).toBeInstanceOf(InvalidOptionError);
    }

    const service = redis.service();
    const handlerCases: Record<string, () => unknown> = {
      'addHandler { overlap }': () => service.addHandler(PaymentCheck, () => true, 1, { overlap: 'skip' } as never),
      'addHandler { prefech }': () => service.addHandler(PaymentCheck, () => true, 1, { prefech: 0 } as never),
      'addHandler { paralelism }': () => service.addHandler(PaymentCheck, () => true, { paralelism: 4 } as never),
      'addHandler keepDead { agems }': () => service.addHandler(PaymentCheck, () => true, { keepDead: { agems: 5 } } as never),
      'addHandler rateLimit { per }': () => service.addHandler(PaymentCheck, () => true, 1, { rateLimit: { max: 1, perMs: 1_000, per: 5 } } as never),
      'addHandler perKey { concurrency }': () => service.addHandler(PaymentCheck, () => true, 1, { key: () => 'k', perKey: { concurrency: 2 } } as never),
      'addBatchHandler { maxBatchSize }': () => service.addBatchHandler(PaymentCheck, () => true, { maxBatchSize: 10 } as never),
      'addBatchHandler { prefetch }': () => service.addBatchHandler(PaymentCheck, () => true, { prefetch: 10 } as never),
    };
    for (const [name, call] of Object.entries(handlerCases)) {
      const error = thrown(call);
      expect(error, name).toBeInstanceOf(InvalidOptionError);
      expect((error as Error).message, name).toContain(`"${/\{ (\w+)/.exec(name)![1]!}"`);
    }
  });

  it('not in maps whose keys are the user own: a context, upcasters', async () => {
    const service = redis.service();
    expect(await service.enqueue(new PaymentCheck('with-context'), 60_000, { context: { anything: 'goes', priorty: 'x' } })).toBe('scheduled');
    expect(() => DelayedEvent('test.upcast-keys', { version: 2, upcast: { 1: (plain) => plain } })).not.toThrow();
  });

  it('registerPrometheusMetrics refuses an unknown key too', async () => {
    const { Registry } = await import('prom-client');
    const service = redis.service();
    expect(thrown(() => registerPrometheusMetrics(service, { registry: new Registry(), prefx: 'x' } as never))).toBeInstanceOf(InvalidOptionError);
    expect(thrown(() => registerPrometheusMetrics(service, { registry: new Registry(), buckets: { latency: [1] } } as never))).toBeInstanceOf(InvalidOptionError);
  });

  it('keepHandled.ageMs holds on reads and as time passes, not only at the next completion', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, keepHandled: { count: 100, ageMs: 800 }, pollIntervalMs: 100 });
    const handled: string[] = [];
    service.addHandler(PaymentCheck, (e) => void handled.push(e.id));
    await service.enqueue(new PaymentCheck('old'), 0);
    await waitFor(async () => (await service.find(PaymentCheck, 'old'))?.state === 'handled', 'the record kept');
    expect((await service.list(PaymentCheck, 'handled')).map((e) => e.id)).toEqual(['old']);
    // No other event completes: the record goes as time passes.
    await waitFor(async () => (await service.find(PaymentCheck, 'old')) === undefined && (await service.list(PaymentCheck, 'handled')).length === 0, 'the record past its age no longer read');
    await waitFor(async () => (await redis.client().zcard(`${prefix}:{test.payment-check}:hi`)) === 0, 'and dropped from Redis by the dispatcher');
    expect(await redis.client().hlen(`${prefix}:{test.payment-check}:h`)).toBe(0);

    // Read past its age before any dispatcher looks again (they look once a minute here): not listed.
    const slowPrefix = redis.prefix();
    const slow = redis.service({ prefix: slowPrefix, keepHandled: { count: 100, ageMs: 500 }, pollIntervalMs: 60_000 });
    slow.addHandler(PaymentCheck, () => true);
    await slow.enqueue(new PaymentCheck('aging'), 0);
    await waitFor(async () => (await slow.find(PaymentCheck, 'aging'))?.state === 'handled', 'the record kept');
    await waitFor(async () => (await slow.find(PaymentCheck, 'aging')) === undefined, 'the record past its age no longer found');
    expect(await slow.list(PaymentCheck, 'handled')).toEqual([]);
    expect(await redis.client().zscore(`${slowPrefix}:{test.payment-check}:hi`, 'aging')).not.toBeNull();
  });
});
