import { afterEach, describe, expect, it, vi } from 'vitest';
import { type Logger, METRIC, fixedBackoff } from '../src';
import { PaymentCheck, WorkItem } from './support/events';
import { counter, recordMetrics, useRedis, waitForDeadLetters } from './support/harness';
import { waitFor } from './support/wait-for';

interface LogRecord {
  readonly level: string;
  readonly fields: Record<string, unknown>;
  readonly message: string;
}

/** A pino-shaped logger that keeps every record. */
function capturingLogger(): Logger & { records: LogRecord[] } {
  const records: LogRecord[] = [];
  const at = (level: string) => (fields: object, message: string) => records.push({ level, fields: fields as Record<string, unknown>, message });
  return { records, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

const outageWarnings = (records: readonly LogRecord[]) => records.filter((r) => r.level === 'warn' && /retries with backoff/.test(r.message));
const recoveries = (records: readonly LogRecord[]) => records.filter((r) => /answers again/.test(r.message));

describe('logging', () => {
  const redis = useRedis();
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('logs an outage once per loop, not once per retry, and its end once', async () => {
    const logger = capturingLogger();
    const service = redis.service({ logger, commandTimeoutMs: 500 });
    const metrics = recordMetrics(service);
    const handled: string[] = [];
    service.addHandler(WorkItem, (e) => void handled.push(e.id), 2);
    await service.enqueue(new WorkItem('before'), 0);
    await waitFor(() => handled.length === 1, 'the service running');
    expect(logger.records).toEqual([]);

    await redis.server.kill();
    await waitFor(
      // The recurring loop too: every instance with handlers advances schedules, and its calls wait for the connection (a second at most).
      () => counter(metrics, METRIC.redisErrors) >= 15 && ['connection', 'reader', 'dispatcher', 'recurring'].every((loop) => counter(metrics, METRIC.redisErrors, { loop }) > 0),
      'many failed retries in every loop',
      20_000,
    );
    const warnings = outageWarnings(logger.records);
    const loops = warnings.map((r) => r.fields.loop);
    expect(new Set(loops).size).toBe(loops.length); // one per loop
    expect(loops).toEqual(expect.arrayContaining(['connection', 'reader', 'dispatcher']));
    expect(warnings.length).toBeLessThan(counter(metrics, METRIC.redisErrors) / 3);
    // The first connection error says why: a connection Redis reset as it died, or one it refused since.
    const connection = warnings.find((r) => r.fields.loop === 'connection')?.fields;
    expect(connection, JSON.stringify(warnings)).toMatchObject({ reason: expect.stringMatching(/^(refused|other)$/), error: expect.stringMatching(/ECONNREFUSED|ECONNRESET/) });
    expect(recoveries(logger.records)).toEqual([]);

    await redis.server.restart();
    await waitFor(() => recoveries(logger.records).length === 1, 'the recovery logged', 20_000);
    await service.enqueue(new WorkItem('after'), 0);
    await waitFor(() => handled.includes('after'), 'handling after the outage', 20_000);
    expect(recoveries(logger.records)).toHaveLength(1);
    expect(recoveries(logger.records)[0]!.fields).toMatchObject({ downMs: expect.any(Number), failedCalls: expect.any(Number) });
    expect(outageWarnings(logger.records)).toHaveLength(warnings.length);
  });

  it('logs dead letters with type, id, group and attempt, and never the payload unless asked', async () => {
    const logger = capturingLogger();
    const service = redis.service({ logger, retry: fixedBackoff(2, 10) });
    service.addHandler(PaymentCheck, () => false, 1, { group: 'billing' });
    await service.enqueue(new PaymentCheck('secret-order', 424242), 0);
    await waitFor(() => logger.records.some((r) => /dead-lettered/.test(r.message)), 'the dead letter logged');
    const record = logger.records.find((r) => /dead-lettered/.test(r.message))!;
    expect(record.level).toBe('warn');
    expect(record.fields).toMatchObject({ type: 'test.payment-check', id: 'secret-order', group: 'billing', attempt: 2, reason: 'attempts-exhausted' });
    expect(JSON.stringify(logger.records)).not.toContain('424242');

    const withPayloads = capturingLogger();
    const verbose = redis.service({ logger: withPayloads, logPayloads: true, retry: fixedBackoff(1, 10) });
    verbose.addHandler(PaymentCheck, () => false, 1);
    await verbose.enqueue(new PaymentCheck('shown', 515151), 0);
    await waitFor(() => withPayloads.records.some((r) => /dead-lettered/.test(r.message)), 'the dead letter logged with its payload');
    expect(JSON.stringify(withPayloads.records)).toContain('515151');
  });

  it('logs nothing with logger: false, through a dead letter and an outage', async () => {
    const written: unknown[] = [];
    for (const method of ['log', 'info', 'warn', 'error', 'debug'] as const) vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void written.push(args));
    const service = redis.service({ logger: false, retry: fixedBackoff(1, 10), commandTimeoutMs: 500 });
    const metrics = recordMetrics(service);
    service.addHandler(WorkItem, () => false, 1);
    await service.enqueue(new WorkItem('dies'), 0);
    await waitForDeadLetters(service, WorkItem);
    await redis.server.kill();
    await waitFor(() => counter(metrics, METRIC.redisErrors) >= 5, 'failed retries', 20_000);
    await redis.server.restart();
    await service.enqueue(new WorkItem('after'), 0);
    await waitForDeadLetters(service, WorkItem, 1);
    expect(written).toEqual([]);
  });

  it('logs to the console by default', async () => {
    const written: string[] = [];
    vi.spyOn(console, 'warn').mockImplementation((line: string) => void written.push(line));
    const service = redis.service({ retry: fixedBackoff(1, 10) });
    service.addHandler(WorkItem, () => false, 1);
    await service.enqueue(new WorkItem('dies'), 0);
    await waitFor(() => written.length > 0, 'a console warning');
    expect(written[0]).toMatch(/^reactive-delayed-events: an event was dead-lettered \{.*"id":"dies"/);
  });
});
