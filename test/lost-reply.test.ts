import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { METRIC, RedisCallTimeoutError, RedisConnectionError, fixedBackoff } from '../src';
import { counter, recordMetrics, useRedis } from './support/harness';
import { WorkItem } from './support/events';
import { TcpProxy } from './support/tcp-proxy';
import { waitFor } from './support/wait-for';

/**
 * Redis ran a call and its reply never came back (a connection reset at the
 * wrong moment, a call that outlived its deadline): a loopback proxy lets the
 * command through and drops the reply. Single server only: the proxy stands in
 * front of one redis-server.
 */
describe('a call whose reply is lost', () => {
  const redis = useRedis();

  it('an enqueue is not sent again by the service, and re-sending it after its event was handled is a duplicate', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    try {
      const prefix = redis.prefix();
      const producer = redis.service({ redis: proxy.url, prefix, commandTimeoutMs: 400 });
      const consumer = redis.service({ prefix });
      const handled: string[] = [];
      consumer.addHandler(WorkItem, (event, _context, delivery) => void handled.push(`${event.id}#${delivery.attempt}`), 1);
      expect(await producer.enqueue(new WorkItem('warm-up'), 0)).toBe('scheduled');
      expect(proxy.loseRepliesOfConnectionsThatSent('EVAL')).toBe(1);

      // Redis stores it and the consumer handles it; the producer only sees its deadline pass.
      await expect(producer.enqueue(new WorkItem('order-7'), 0)).rejects.toBeInstanceOf(RedisCallTimeoutError);
      await waitFor(() => handled.includes('order-7#1'), 'the event handled');
      // The application does what the error says may be done: send it again until Redis answers. A
      // re-send made while the stuck connection is being replaced fails at once with RedisConnectionError.
      let sends = 0;
      const resend = async (): Promise<unknown> => {
        sends++;
        return producer.enqueue(new WorkItem('order-7'), 0).catch((error: unknown) => error);
      };
      let answer = await resend();
      while (answer instanceof RedisConnectionError && sends < 5) answer = await resend();
      expect(answer).toBe('duplicate');
      await waitFor(() => handled.length === 2, 'the warm-up handled too');

      // Once by the call that lost its reply, then by the application: the client itself never re-sent it.
      expect(proxy.timesSent('order-7')).toBe(1 + sends);
      expect(handled.filter((h) => h.startsWith('order-7'))).toEqual(['order-7#1']);
    } finally {
      await proxy.stop();
    }
  });

  it('a claim gives its events back without spending an attempt, and they are handled at once', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    try {
      const prefix = redis.prefix();
      // One attempt only: an attempt spent without the handler running would dead-letter the event.
      // A long lease: without the give-back the event would wait it out, far past this test's deadline.
      // A long readerBlockMs: once idle, the reader waits for a nudge and sends nothing meanwhile.
      const service = redis.service({ redis: proxy.url, prefix, commandTimeoutMs: 400, handlerTimeoutMs: 60_000, pollIntervalMs: 60_000, readerBlockMs: 60_000, retry: fixedBackoff(1, 0) });
      const metrics = recordMetrics(service);
      const handled: string[] = [];
      service.addHandler(WorkItem, (event, _context, delivery) => void handled.push(`${event.id}#${delivery.attempt}`), 1);
      await service.enqueue(new WorkItem('warm-up'), 0);
      await waitFor(() => handled.length === 1, 'the warm-up handled');
      // The reader's last claim found nothing and dropped its claim log: it waits, idle. Replies to the handlers'
      // connection (claims, which name the reader's claim log) are lost from now on.
      // Idle: its log is gone and it sent no claim since the previous look (a loop's claims come back to back).
      let claimsSeen = -1;
      await waitFor(async () => {
        const claims = proxy.timesSent(`${prefix}:{test.work}:c:`);
        const idle = claims === claimsSeen && (await redis.keys(`${prefix}:{test.work}:c:*`)).length === 0 && (await redis.client().hlen(`${prefix}:{test.work}:m`)) === 0;
        claimsSeen = claims;
        return idle;
      }, 'the reader idle');
      expect(proxy.loseRepliesOfConnectionsThatSent(`${prefix}:{test.work}:c:`)).toBe(1);

      // Straight into the ready list, and said on the wake-up channel, as a dispatcher would: the reader wakes and claims on the silent connection.
      const client = redis.client();
      const now = Number((await client.time())[0]) * 1_000;
      await client.hset(`${prefix}:{test.work}:m`, 'claimed-in-the-dark', `0|${now}|${JSON.stringify([now, { id: 'claimed-in-the-dark', n: 0 }])}`);
      await client.rpush(`${prefix}:{test.work}:r`, 'claimed-in-the-dark');
      await client.publish(`${prefix}:wake`, 'test.work|-1');

      await waitFor(() => handled.length === 2, 'the event handled after its claim was given back', 10_000);
      expect(handled[1]).toBe('claimed-in-the-dark#1');
      // Counted once, unless the give-back's own reply was lost too on the silent connection (it gave the event
      // back, and the retry found nothing left to give): then uncounted, the event handled all the same.
      expect(counter(metrics, METRIC.claimsReleased, { type: 'test.work' })).toBeLessThanOrEqual(1);
      expect(await service.deadLetters(WorkItem)).toEqual([]);
      await waitFor(async () => (await redis.keys(`${prefix}:*`)).every((key) => key.endsWith(':i')), 'nothing but idempotency marks left');
    } finally {
      await proxy.stop();
    }
  });

  it('a start mark whose call got no reply is sent again, so a started event held ahead counts its attempt if its process dies', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    try {
      const prefix = redis.prefix();
      const service = redis.service({ redis: proxy.url, prefix, commandTimeoutMs: 400, handlerTimeoutMs: 60_000 });
      const gates = [0, 1].map(() => {
        let open!: () => void;
        const opened = new Promise<void>((resolve) => (open = resolve));
        return { opened, open: () => open() };
      });
      // All stored before the handler runs: no enqueue's wake-up makes the reader call Redis meanwhile.
      for (let i = 0; i < 40; i++) await service.enqueue(new WorkItem(`w${i}`), 0);
      let calls = 0;
      let slowId = '';
      // Nine quick calls, so the reader learns the pace and claims ahead; the tenth waits for the first gate, the eleventh for the second.
      service.addHandler(
        WorkItem,
        async (event) => {
          const call = ++calls;
          if (call === 10) await gates[0]!.opened;
          if (call === 11) {
            slowId = event.id;
            await gates[1]!.opened;
          }
        },
        1,
      );
      const inFlight = `${prefix}:{test.work}:f`;
      await waitFor(async () => calls === 10 && (await redis.client().zcard(inFlight)) > 2, 'events claimed ahead of the running tenth call');

      // The tenth call's success and the eleventh's start go out together, on a connection that no longer answers.
      expect(proxy.blackholeAll()).toBeGreaterThan(0);
      gates[0]!.open();
      await waitFor(() => slowId !== '', 'the eleventh call running');
      // Once Redis answers again, the start is marked: its lease score is odd (includes/lease-constants.lua).
      await waitFor(
        async () => {
          const score = await redis.client().zscore(inFlight, slowId);
          return score !== null && BigInt(score) % 2n === 1n;
        },
        'the running event marked started in Redis',
        10_000,
      );
      gates[1]!.open();
      await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.work}:m`)) === 0, 'every event handled');
    } finally {
      await proxy.stop();
    }
  });

  it('a call that outlives its deadline on a client passed in is counted and warned about; the client is left as it is', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    const yours = new Redis(proxy.url);
    yours.on('error', () => undefined);
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const service = redis.service({ redis: yours, prefix: redis.prefix(), commandTimeoutMs: 300 });
      const metrics = recordMetrics(service);
      expect(await service.enqueue(new WorkItem('before'), 60_000)).toBe('scheduled');
      expect(proxy.blackholeConnectionsThatSent('EVAL')).toBe(1);
      await expect(service.enqueue(new WorkItem('lost'), 60_000)).rejects.toBeInstanceOf(RedisCallTimeoutError);
      expect(counter(metrics, METRIC.redisCallTimeouts, { connection: 'passed-in' })).toBe(1);
      await waitFor(() => warnings.some((w) => (w as Error & { code?: string }).code === 'DELAYED_EVENTS_REDIS_CALL_TIMEOUT'), 'the process warning');
      // Not reset by the service: the client is the application's.
      expect(yours.status).toBe('ready');
    } finally {
      process.off('warning', onWarning);
      yours.disconnect();
      await proxy.stop();
    }
  });

  it('the wake-up subscriber is replaced when its connection goes silent, so a new event is not left to the poll', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    try {
      const prefix = redis.prefix();
      // Polls once a minute: only a wake-up brings a new event in time.
      const service = redis.service({ redis: proxy.url, prefix, pollIntervalMs: 60_000, readerBlockMs: 300, watchdogGraceMs: 300 });
      const metrics = recordMetrics(service);
      const handled: string[] = [];
      service.addHandler(WorkItem, (event) => void handled.push(event.id), 1);
      await service.enqueue(new WorkItem('before'), 200);
      await waitFor(() => handled.length === 1, 'an event handled through a wake-up');
      // The command itself, as RESP carries it: script texts sent with EVAL mention subscriber groups.
      expect(proxy.blackholeConnectionsThatSent('\r\nSUBSCRIBE\r\n')).toBe(1);

      await waitFor(() => counter(metrics, METRIC.wakeListenerResets) >= 1, 'the silent subscriber replaced', 5_000);
      await service.enqueue(new WorkItem('after'), 200);
      await waitFor(() => handled.length === 2, 'the next event woken in time', 5_000);
    } finally {
      await proxy.stop();
    }
  });

  it('a running call whose lease renewals go unanswered past the heartbeat lease is aborted with lease-lost, and counted', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    try {
      const prefix = redis.prefix();
      // A renewal that hangs (the default commandTimeoutMs is 10 s) does not hold the give-up back: each tick checks.
      const service = redis.service({ redis: proxy.url, prefix, heartbeatMs: 250, handlerTimeoutMs: 3_600_000, closeTimeoutMs: 100 });
      const metrics = recordMetrics(service);
      let signal: AbortSignal | undefined;
      service.addHandler(WorkItem, (_e, _c, d) => ((signal = d.signal), new Promise<boolean>(() => undefined)));
      await service.enqueue(new WorkItem('cut-off'), 0);
      await waitFor(() => signal !== undefined, 'the call started');
      const cutAt = Date.now();
      proxy.blackholeNewConnections();
      proxy.blackholeAll();
      await waitFor(() => signal?.aborted === true, 'the call given up', 5_000);
      expect(Date.now() - cutAt).toBeLessThan(2_000);
      // Not before its lease could have lapsed: 3 heartbeats less half of one, from the last renewal.
      expect(Date.now() - cutAt).toBeGreaterThanOrEqual(250);
      expect((signal!.reason as { code?: string }).code).toBe('lease-lost');
      expect(counter(metrics, METRIC.callsAbandoned, { reason: 'lease-lost' })).toBe(1);
    } finally {
      await proxy.stop();
    }
  });
});
