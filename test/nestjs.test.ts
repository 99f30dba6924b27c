import { Inject, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { describe, expect, it } from 'vitest';
import { DelayedEventService, type Delivery, type EventContext } from '../src';
import { DelayedEventsModule, OnDelayedEvent } from '../src/integrations/nestjs';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/** What the handlers saw, shared by the test and the providers. */
const seen: Array<{ by: string; id: string; group: string; context: EventContext }> = [];

@Injectable()
class Billing {
  @OnDelayedEvent(WorkItem, { parallelism: 2 })
  charge(event: WorkItem, context: EventContext, delivery: Delivery): void {
    seen.push({ by: 'billing', id: event.id, group: delivery.group, context });
  }
}

@Injectable()
class Audit {
  // No emitDecoratorMetadata: dependencies are named with @Inject.
  constructor(@Inject(DelayedEventService) readonly events: DelayedEventService) {}

  @OnDelayedEvent(WorkItem, { group: 'audit', timeoutMs: 5_000 })
  async write(event: WorkItem, _context: EventContext, delivery: Delivery): Promise<void> {
    seen.push({ by: 'audit', id: event.id, group: delivery.group, context: {} });
  }
}

@Injectable()
class Orders {
  constructor(@Inject(DelayedEventService) private readonly events: DelayedEventService) {}

  schedule(id: string): Promise<string> {
    return this.events.enqueue(new WorkItem(id), 0, { context: { tenant: 'acme' } });
  }
}

@Module({ providers: [Billing, Audit] })
class HandlersModule {}

describe('NestJS', () => {
  const redis = useRedis();

  it('runs decorated handler methods for events enqueued through the injected service, and closes with the application', async () => {
    seen.length = 0;
    const moduleRef = await Test.createTestingModule({
      imports: [DelayedEventsModule.forRoot({ redis: redis.server.url, prefix: redis.prefix(), pollIntervalMs: 200, logger: false }), HandlersModule],
      providers: [Orders],
    }).compile();
    const app = await moduleRef.init();
    const service = app.get(DelayedEventService);
    expect(app.get(Audit).events).toBe(service);

    expect(await app.get(Orders).schedule('order-1')).toBe('scheduled');
    await waitFor(() => seen.length === 2, 'both handlers called');
    expect(seen.map((s) => s.by).sort()).toEqual(['audit', 'billing']);
    expect(seen.find((s) => s.by === 'billing')).toMatchObject({ id: 'order-1', group: 'default', context: { tenant: 'acme' } });
    expect(seen.find((s) => s.by === 'audit')).toMatchObject({ id: 'order-1', group: 'audit' });
    expect((await service.health()).loops.readers).toBe(2);

    await app.close();
    // close() resolved: the service took no more calls and released its connections.
    await expect(service.enqueue(new WorkItem('late'), 0)).rejects.toMatchObject({ code: 'SERVICE_CLOSED' });
    expect(await service.health()).toMatchObject({ ready: false, loops: { dispatchers: 0, readers: 0 } });
  });

  it('takes its options from a factory with forRootAsync', async () => {
    const url = redis.server.url;
    const prefix = redis.prefix();
    @Module({ providers: [{ provide: 'REDIS_URL', useValue: url }], exports: ['REDIS_URL'] })
    class ConfigModule {}

    const moduleRef = await Test.createTestingModule({
      imports: [DelayedEventsModule.forRootAsync({ imports: [ConfigModule], inject: ['REDIS_URL'], useFactory: async (redisUrl: string) => ({ redis: redisUrl, prefix, logger: false }) })],
    }).compile();
    const app = await moduleRef.init();
    const service = app.get(DelayedEventService);
    expect(service.prefix).toBe(prefix);
    await service.waitUntilReady({ timeoutMs: 5_000 });
    await app.close();
    expect((await service.health()).ready).toBe(false);
  });
});
