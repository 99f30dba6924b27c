import { describe, expect, it } from 'vitest';
import type { Logger } from '../src';
import { PaymentCheck } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/** Records what the service logs, so a test can see what it said and how often. */
function recordingLogger(): Logger & { readonly warnings: Array<{ fields: Record<string, unknown>; message: string }> } {
  const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
  return {
    warnings,
    warn: (fields, message) => warnings.push({ fields: fields as Record<string, unknown>, message }),
    error: () => undefined,
  };
}

/**
 * Redis that comes back empty (restarted without persistence, flushed, failed
 * over to an empty replica) holds none of the instances' registrations: each
 * instance notices within its poll interval and registers its groups and
 * recurring schedules again, saying so once.
 */
describe('self-healing after Redis loses its data', () => {
  const redis = useRedis();

  async function flushEveryMaster(): Promise<void> {
    await Promise.all((await redis.masters()).map((master) => master.flushall()));
  }

  it('registers its groups and recurring schedules again, and events reach every group', async () => {
    const logger = recordingLogger();
    const service = redis.service({ pollIntervalMs: 200, logger });
    const billing: string[] = [];
    const main: string[] = [];
    service.addHandler(PaymentCheck, (e) => void billing.push(e.id), 2, { group: 'billing' });
    service.addHandler(PaymentCheck, (e) => void main.push(e.id), 2);
    await service.schedule('tick', new PaymentCheck(''), { every: 200 });
    await service.enqueue(new PaymentCheck('before'), 0);
    await waitFor(() => billing.includes('before') && main.includes('before') && billing.some((id) => id.startsWith('tick@')), 'both groups and the schedule running');

    await flushEveryMaster();
    await waitFor(() => logger.warnings.filter((w) => w.message.startsWith('Redis lost')).length >= 2, 'the loss noticed for the group and the schedule', 10_000).catch((error: Error) => {
      // Rare under load; what was said by then tells which of the two was not noticed.
      throw new Error(`${error.message}; warnings: ${JSON.stringify(logger.warnings.map((w) => ({ message: w.message.slice(0, 60), ...w.fields })))}`);
    });
    // What falls due before the group is registered again goes to the groups registered then: wait for it.
    const registry = `${service.prefix}:{test.payment-check}:groups`;
    await waitFor(async () => (await redis.client().hkeys(registry)).sort().join() === 'billing,default', 'the groups registered again');
    const ticksBefore = billing.filter((id) => id.startsWith('tick@')).length;
    await service.enqueue(new PaymentCheck('after'), 0);
    await waitFor(() => billing.includes('after') && main.includes('after'), 'an event after the loss reaching both groups', 10_000);
    await waitFor(() => billing.filter((id) => id.startsWith('tick@')).length > ticksBefore, 'the schedule running again', 10_000);
    expect((await service.schedules(PaymentCheck)).map((s) => s.name)).toEqual(['tick']);

    // Said once per loss: one record for the group, one for the schedules.
    const lost = logger.warnings.filter((w) => w.message.startsWith('Redis lost'));
    expect(lost.filter((w) => Array.isArray(w.fields.groups) && (w.fields.groups as string[]).includes('billing'))).toHaveLength(1);
    expect(lost.filter((w) => Array.isArray(w.fields.schedules))).toHaveLength(1);
  });

  it('every instance registers its own groups and schedules again, not only the first to notice', async () => {
    const prefix = redis.prefix();
    const instances = ['a', 'b'].map((name) => {
      const logger = recordingLogger();
      const service = redis.service({ prefix, pollIntervalMs: 100, logger });
      const seen: string[] = [];
      service.addHandler(PaymentCheck, (e) => void seen.push(e.id), 1, { group: `group-${name}` });
      return { name, service, seen, logger };
    });
    await instances[0]!.service.schedule('tick-a', new PaymentCheck(''), { every: 150 });
    await instances[1]!.service.schedule('tick-b', new PaymentCheck(''), { every: 150 });
    const registry = `${prefix}:{test.payment-check}:groups`;
    await waitFor(async () => (await redis.client().hkeys(registry)).sort().join() === 'group-a,group-b', 'both groups registered');

    await flushEveryMaster();
    await waitFor(async () => (await redis.client().hkeys(registry)).sort().join() === 'group-a,group-b', 'both groups registered again', 10_000);
    await waitFor(
      async () =>
        (await instances[0]!.service.schedules(PaymentCheck))
          .map((s) => s.name)
          .sort()
          .join() === 'tick-a,tick-b',
      'both schedules stored again',
      10_000,
    );
    await instances[0]!.service.enqueue(new PaymentCheck('after'), 0);
    await waitFor(() => instances.every((i) => i.seen.includes('after')), 'the event in both groups', 10_000);
  });

  it('a group removed on purpose by another instance is not registered again', async () => {
    const prefix = redis.prefix();
    const logger = recordingLogger();
    const a = redis.service({ prefix, pollIntervalMs: 100, logger });
    const b = redis.service({ prefix, pollIntervalMs: 100 });
    a.addHandler(PaymentCheck, () => true, 1, { group: 'audit' });
    a.addHandler(PaymentCheck, () => true, 1);
    await waitFor(async () => (await redis.client().hexists(`${prefix}:{test.payment-check}:groups`, 'audit')) === 1, 'the group registered');
    expect(await b.removeGroup(PaymentCheck, 'audit')).toBe(true);
    // Several of a's dispatch rounds later, the group stays removed.
    await b.enqueue(new PaymentCheck('probe'), 0);
    await waitFor(async () => (await b.find(PaymentCheck, 'probe')) === undefined, 'the default group handling the probe');
    expect(await redis.client().hexists(`${prefix}:{test.payment-check}:groups`, 'audit')).toBe(0);
    expect(logger.warnings.filter((w) => w.message.startsWith('Redis lost'))).toEqual([]);
  });

  it.skipIf(redis.topology === 'cluster')('after a restart without persistence too', async () => {
    const logger = recordingLogger();
    const service = redis.service({ pollIntervalMs: 200, logger });
    const audit: string[] = [];
    service.addHandler(PaymentCheck, (e) => void audit.push(e.id), 1, { group: 'audit' });
    service.addHandler(PaymentCheck, () => true, 1);
    await service.enqueue(new PaymentCheck('before'), 0);
    await waitFor(() => audit.includes('before'), 'the group running');
    await redis.server.kill();
    await redis.server.restart();
    await waitFor(
      () => logger.warnings.some((w) => w.message.startsWith('Redis lost') && Array.isArray(w.fields.groups) && (w.fields.groups as string[]).includes('audit')),
      'the loss noticed',
      15_000,
    );
    await waitFor(async () => (await redis.client().hexists(`${service.prefix}:{test.payment-check}:groups`, 'audit')) === 1, 'the group registered again');
    await waitFor(async () => (await service.enqueue(new PaymentCheck('after'), 0).catch(() => 'down')) === 'scheduled', 'Redis taking enqueues', 10_000);
    await waitFor(() => audit.includes('after'), 'the group getting events again', 10_000);
  });
});
