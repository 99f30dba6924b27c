/**
 * npm run demo: schedules a few events, shows them handled (one retried, one
 * dead-lettered) and the metrics. Uses REDIS_URL, or starts a private
 * redis-server on a free port when it is unset.
 */
import 'reflect-metadata';
import { Type } from 'class-transformer';
import { DelayedEvent, DelayedEventService, type Metric, fixedBackoff } from '../src';
import { RedisServer } from '../test/support/redis-server';

@DelayedEvent('demo.payment-check')
class PaymentCheck {
  constructor(
    readonly id: string = '',
    readonly amountCents: number = 0,
  ) {}
}

@DelayedEvent('demo.reminder')
class Reminder {
  @Type(() => Date)
  createdAt: Date = new Date();

  constructor(
    readonly id: string = '',
    readonly text: string = '',
  ) {}
}

const started = Date.now();
const log = (message: string) => console.log(`[+${String(Date.now() - started).padStart(5)} ms] ${message}`);

async function main(): Promise<void> {
  const server = process.env.REDIS_URL ? undefined : await RedisServer.start();
  const url = process.env.REDIS_URL ?? server!.url;
  log(server ? `started a private redis-server on ${url} (pid ${server.pid})` : `using REDIS_URL ${url}`);

  const service = new DelayedEventService({ redis: url, prefix: `demo-${process.pid}`, retry: fixedBackoff(3, 300), gaugeIntervalMs: 1_000 });
  const counters = new Map<string, number>();
  service.metrics$.subscribe((m: Metric) => {
    if (m.kind !== 'counter') return;
    const key = `${m.name} ${JSON.stringify(m.tags)}`;
    counters.set(key, (counters.get(key) ?? 0) + m.value);
  });

  let flakyCalls = 0;
  service.addHandler(PaymentCheck, (event, context, delivery) => {
    if (event.id === 'pay-flaky' && ++flakyCalls < 2) {
      log(`payment ${event.id}: gateway timeout on attempt ${delivery.attempt}, will retry`);
      return false;
    }
    if (event.id === 'pay-broken') throw new Error('card issuer unreachable');
    log(`payment ${event.id} checked (${event.amountCents} cents), attempt ${delivery.attempt}, tenant ${context.tenant}, late by ${Date.now() - delivery.dueAt} ms`);
    return true;
  }, 4);
  service.addHandler(Reminder, async (event) => {
    log(`reminder ${event.id}: "${event.text}" (created ${event.createdAt.toISOString()}), trace ${service.currentContext()?.traceId}`);
    return true;
  }, 2);

  const context = { tenant: 'acme', traceId: 'trace-42' };
  await service.enqueue(new PaymentCheck('pay-1', 1999), { seconds: 1 }, { context });
  await service.enqueue(new PaymentCheck('pay-flaky', 500), 1_500, { context });
  await service.enqueue(new PaymentCheck('pay-broken', 700), 500, { context });
  await service.enqueue(new Reminder('remind-1', 'stand up and stretch'), 2_000, { context });
  const duplicate = await service.enqueue(new PaymentCheck('pay-1', 1999), { seconds: 1 });
  log(`scheduled 4 events; enqueueing pay-1 again was a ${duplicate}`);

  // Wait for the outcome we expect: three handled, one dead-lettered.
  for (;;) {
    const dead = await service.deadLetters(PaymentCheck);
    const successes = [...counters].filter(([k]) => k.includes('outcome":"success')).reduce((n, [, v]) => n + v, 0);
    if (dead.length === 1 && successes === 3) {
      log(`dead letter: ${dead[0]!.id} after ${dead[0]!.attempts} attempts: ${dead[0]!.error}`);
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  console.log('\nmetrics (counters):');
  for (const [key, value] of [...counters].sort()) console.log(`  ${key} = ${value}`);

  await service.purgeDeadLetters(PaymentCheck);
  await service.close();
  await server?.stop();
  log('closed');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
