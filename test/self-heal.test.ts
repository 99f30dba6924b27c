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
    // Both registrations done, and the queue's marker set: nothing of a's start-up is still under way (on a loaded
    // machine a registration or a first dispatch that registers could otherwise land after the removal).
    await waitFor(async () => {
      const client = redis.client();
      const [audit, fallback, marker] = await Promise.all([
        client.hexists(`${prefix}:{test.payment-check}:groups`, 'audit'),
        client.hexists(`${prefix}:{test.payment-check}:groups`, 'default'),
        client.exists(`${prefix}:{test.payment-check}:here`),
      ]);
      return audit + fallback + marker === 3;
    }, 'the groups registered');
    await a.enqueue(new PaymentCheck('warm-up'), 0);
    await waitFor(async () => (await a.find(PaymentCheck, 'warm-up')) === undefined, "a's dispatcher and readers running");
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
  it('an event enqueued in the window before the group is registered again reaches it: the first look registers first', async () => {
    for (const withDefault of [false, true]) {
      const prefix = redis.prefix();
      const service = redis.service({ prefix, pollIntervalMs: 200 });
      const billing: string[] = [];
      const main: string[] = [];
      service.addHandler(PaymentCheck, (e) => void billing.push(e.id), 1, { group: 'billing' });
      if (withDefault) service.addHandler(PaymentCheck, (e) => void main.push(e.id), 1);
      await service.enqueue(new PaymentCheck('before'), 0);
      await waitFor(() => billing.includes('before'), 'the group running');

      // Enqueued at once: nothing has noticed the loss yet, and no group is registered. A look (every 200 ms) may
      // come between the flush and the check, on a Cluster flushed master by master most of all: then again.
      let inTheWindow = false;
      for (let tries = 0; tries < 20 && !inTheWindow; tries++) {
        await flushEveryMaster();
        inTheWindow = (await redis.client().exists(`${prefix}:{test.payment-check}:groups`)) === 0;
      }
      expect(inTheWindow).toBe(true);
      await service.enqueue(new PaymentCheck('in-the-window'), 0);
      await waitFor(() => billing.includes('in-the-window'), `the event in the window reaching the group (default handlers: ${withDefault})`, 10_000);
      if (withDefault) await waitFor(() => main.includes('in-the-window'), 'and the default group', 10_000);
      expect(await redis.client().llen(`${prefix}:{test.payment-check}:r`)).toBe(0);
      await service.close();
    }
  });

  it('events left in the default ready list of a type without a default group while its registrations were lost go to every group', async () => {
    const prefix = redis.prefix();
    // No look of its own for a minute: the stranded event is in place before the first one after the loss.
    const service = redis.service({ prefix, pollIntervalMs: 60_000 });
    const billing: string[] = [];
    const audit: string[] = [];
    service.addHandler(PaymentCheck, (e) => void billing.push(e.id), 1, { group: 'billing' });
    service.addHandler(PaymentCheck, (e) => void audit.push(e.id), 1, { group: 'audit' });
    await service.enqueue(new PaymentCheck('before'), 0);
    await waitFor(() => billing.includes('before') && audit.includes('before'), 'both groups running');

    // A stored body, as the service writes one, for the event stranded below.
    const client = redis.client();
    const base = `${prefix}:{test.payment-check}`;
    await service.enqueue(new PaymentCheck('template', 7), 3_600_000);
    const stored = (await client.hget(`${base}:m`, 'template'))!;
    const body = stored.slice(stored.indexOf('|', stored.indexOf('|') + 1) + 1).replace('"template"', '"stranded"');

    await flushEveryMaster();
    // As an instance that could not restore the groups would leave it (one of an earlier release, say):
    // the event stored, and in the default group's ready list, which nobody reads.
    const now = Number((await client.time())[0]) * 1_000;
    await client.hset(`${base}:m`, 'stranded', `0|${now}|${body}`);
    await client.rpush(`${base}:r`, 'stranded');
    // A new event's wake-up brings the first look after the loss.
    await service.enqueue(new PaymentCheck('wake'), 0);
    await waitFor(() => ['stranded', 'wake'].every((id) => billing.includes(id) && audit.includes(id)), 'the stranded event handed to both groups', 10_000);
    expect(await client.llen(`${base}:r`)).toBe(0);
    await waitFor(async () => (await service.find(PaymentCheck, 'stranded')) === undefined, 'the stranded event done in both groups');
  });

  it("a type's first named group takes nothing from the default group's live readers", async () => {
    const prefix = redis.prefix();
    const a = redis.service({ prefix, pollIntervalMs: 100 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const main: string[] = [];
    a.addHandler(
      PaymentCheck,
      async (e) => {
        if (e.id === 'e0') await gate;
        main.push(e.id);
      },
      1,
      { prefetch: 0 },
    );
    for (let i = 0; i < 5; i++) await a.enqueue(new PaymentCheck(`e${i}`), 0);
    await waitFor(async () => (await a.counts(PaymentCheck))?.ready === 4, 'four events waiting in the default ready list');
    const b = redis.service({ prefix, pollIntervalMs: 100 });
    const billing: string[] = [];
    b.addHandler(PaymentCheck, (e) => void billing.push(e.id), 1, { group: 'billing' });
    await b.enqueue(new PaymentCheck('later'), 0);
    await waitFor(() => billing.includes('later'), 'the new group running');
    release();
    await waitFor(() => main.filter((id) => id.startsWith('e')).length === 5, 'the default group handling what waited for it');
    expect(billing.filter((id) => id.startsWith('e'))).toEqual([]);
  });
});
