import { defer } from 'rxjs';
import { describe, expect, it } from 'vitest';
import type { DelayedEventService, EventContext } from '../src';
import { PaymentCheck, WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

async function deepInside(service: DelayedEventService): Promise<EventContext | undefined> {
  await new Promise((resolve) => setTimeout(resolve, 1));
  return service.currentContext();
}

describe('event context', () => {
  const redis = useRedis();

  it('given at enqueue, is the handler argument and readable anywhere the handler calls', async () => {
    const service = redis.service();
    const seen: Array<{ argument: EventContext; inside: EventContext | undefined }> = [];
    service.addHandler(
      PaymentCheck,
      async (_e, context) => {
        seen.push({ argument: context, inside: await deepInside(service) });
        return true;
      },
      1,
    );
    await service.enqueue(new PaymentCheck('c'), 0, { context: { traceId: 'trace-1', tenant: 'acme' } });
    await waitFor(() => seen.length === 1, 'the handler call');
    expect(seen[0]).toEqual({ argument: { traceId: 'trace-1', tenant: 'acme' }, inside: { traceId: 'trace-1', tenant: 'acme' } });
    expect(service.currentContext()).toBeUndefined();
  });

  it('is captured from the caller when not given: inside runWithContext, and from a running handler', async () => {
    const service = redis.service();
    const contexts: Record<string, EventContext> = {};
    service.addHandler(
      PaymentCheck,
      async (e) => {
        // An event enqueued while handling carries the handler's context on.
        await service.enqueue(new WorkItem(`follow-up-of-${e.id}`), 0);
        return true;
      },
      1,
    );
    service.addHandler(WorkItem, (e, context) => ((contexts[e.id] = context), true), 1);
    await service.runWithContext({ traceId: 'from-caller' }, () => service.enqueue(new PaymentCheck('origin'), 0));
    await waitFor(() => contexts['follow-up-of-origin'], 'the follow-up event');
    expect(contexts['follow-up-of-origin']).toEqual({ traceId: 'from-caller' });
  });

  it('an event without context sees none, even in a handler registered inside a context or after events that had one', async () => {
    const service = redis.service();
    const seen: Record<string, EventContext | undefined> = {};
    service.runWithContext({ traceId: 'around-registration' }, () =>
      service.addHandler(
        PaymentCheck,
        async (e) => {
          seen[e.id] = await deepInside(service);
          return true;
        },
        1,
      ),
    );
    service.addHandler(
      WorkItem,
      (e) => {
        seen[e.id] = service.currentContext();
        return true;
      },
      1,
    );
    await service.enqueue(new WorkItem('plain-first'), 0);
    await waitFor(() => 'plain-first' in seen, 'the first plain event');
    await service.enqueue(new WorkItem('with-context'), 0, { context: { traceId: 'own' } });
    await waitFor(() => 'with-context' in seen, 'the event with context');
    await service.enqueue(new WorkItem('plain-after'), 0);
    await service.enqueue(new PaymentCheck('plain-async'), 0);
    await waitFor(() => 'plain-after' in seen && 'plain-async' in seen, 'the later plain events');
    expect(seen).toEqual({ 'plain-first': undefined, 'with-context': { traceId: 'own' }, 'plain-after': undefined, 'plain-async': undefined });
  });

  it('a handler answering with an Observable runs it inside the event context', async () => {
    const service = redis.service();
    const seen: Array<EventContext | undefined> = [];
    service.addHandler(PaymentCheck, () => defer(async () => (seen.push(await deepInside(service)), true)), 1);
    await service.enqueue(new PaymentCheck('observable'), 0, { context: { traceId: 'obs' } });
    await waitFor(() => seen.length === 1, 'the Observable handler');
    expect(seen).toEqual([{ traceId: 'obs' }]);
  });

  it('a contextProvider supplies context when the call gives none', async () => {
    const service = redis.service({ contextProvider: () => ({ region: 'eu' }) });
    const contexts: EventContext[] = [];
    service.addHandler(PaymentCheck, (_e, context) => (contexts.push(context), true), 1);
    await service.enqueue(new PaymentCheck('p'), 0);
    await service.enqueue(new PaymentCheck('q'), 0, { context: { region: 'us' } });
    await waitFor(() => contexts.length === 2, 'both handler calls');
    expect(contexts.map((c) => c.region).sort()).toEqual(['eu', 'us']);
  });

  it('a context handler wraps every handler call and sees context and delivery', async () => {
    const log: string[] = [];
    const service = redis.service({
      contextHandler: async (context, delivery, next) => {
        log.push(`before ${context.traceId} ${delivery.type}#${delivery.id} attempt ${delivery.attempt}`);
        const ok = await next();
        log.push(`after ${ok}`);
        return ok;
      },
    });
    service.addHandler(PaymentCheck, () => (log.push('handler'), true), 1);
    await service.enqueue(new PaymentCheck('w'), 0, { context: { traceId: 't-9' } });
    await waitFor(() => log.length === 3, 'the wrapped call');
    expect(log).toEqual(['before t-9 test.payment-check#w attempt 1', 'handler', 'after true']);
  });
});
