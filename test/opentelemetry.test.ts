import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fixedBackoff } from '../src';
import { openTelemetry } from '../src/integrations/opentelemetry';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

describe('OpenTelemetry', () => {
  const redis = useRedis();
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer('test');
  const contextManager = new AsyncLocalStorageContextManager();

  beforeAll(() => {
    context.setGlobalContextManager(contextManager.enable());
  });
  afterAll(() => {
    contextManager.disable();
    context.disable();
  });
  beforeEach(() => exporter.reset());

  const spans = () => exporter.getFinishedSpans();
  const named = (name: string) => spans().filter((s) => s.name === name);
  const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

  it('an enqueue in a span makes a producer span; the handling in another instance a consumer span linked to it, with the handler’s spans inside', async () => {
    const prefix = redis.prefix();
    const producer = redis.service({ prefix, ...openTelemetry({ tracer }) });
    const consumer = redis.service({ prefix, ...openTelemetry({ tracer }) });
    let seenContext: Record<string, string> | undefined;
    consumer.addHandler(
      WorkItem,
      (_event, eventContext) => {
        seenContext = { ...eventContext };
        tracer.startActiveSpan('charge card', (span) => span.end());
      },
      1,
      { group: 'billing' },
    );

    await tracer.startActiveSpan('POST /orders', async (request) => {
      await producer.runWithContext({ tenant: 'acme' }, () => producer.enqueue(new WorkItem('order-1'), 0));
      request.end();
    });
    await waitFor(() => named('charge card').length === 1 && named('process test.work').length === 1, 'the consumer span');

    const [request] = named('POST /orders');
    const [send] = named('send test.work');
    const [process] = named('process test.work');
    const [own] = named('charge card');
    expect(send!.kind).toBe(SpanKind.PRODUCER);
    expect(parentOf(send!)).toBe(request!.spanContext().spanId);
    expect(send!.spanContext().traceId).toBe(request!.spanContext().traceId);
    expect(send!.attributes).toMatchObject({
      'messaging.system': 'reactive_delayed_events',
      'messaging.operation.type': 'send',
      'messaging.destination.name': 'test.work',
      'messaging.message.id': 'order-1',
      'messaging.reactive_delayed_events.status': 'scheduled',
    });
    // The stored context carries the producer span, and the fields the app put there.
    expect(seenContext).toMatchObject({ tenant: 'acme', traceparent: `00-${send!.spanContext().traceId}-${send!.spanContext().spanId}-01` });

    expect(process!.kind).toBe(SpanKind.CONSUMER);
    expect(process!.links.map((l) => l.context.spanId)).toEqual([send!.spanContext().spanId]);
    expect(process!.links[0]!.context.traceId).toBe(request!.spanContext().traceId); // linked into the enqueuer's trace
    expect(process!.spanContext().traceId).not.toBe(request!.spanContext().traceId); // a trace of its own
    expect(parentOf(process!)).toBeUndefined();
    expect(process!.status.code).not.toBe(SpanStatusCode.ERROR);
    expect(process!.attributes).toMatchObject({
      'messaging.operation.type': 'process',
      'messaging.destination.name': 'test.work',
      'messaging.message.id': 'order-1',
      'messaging.consumer.group.name': 'billing',
      'messaging.reactive_delayed_events.attempt': 1,
      'messaging.reactive_delayed_events.outcome': 'success',
    });
    expect(parentOf(own!)).toBe(process!.spanContext().spanId);
    expect(own!.spanContext().traceId).toBe(process!.spanContext().traceId);
  });

  it('with parent: "parent", the consumer span is a child of the producer span, in its trace', async () => {
    const prefix = redis.prefix();
    const producer = redis.service({ prefix, ...openTelemetry({ tracer, parent: 'parent' }) });
    const consumer = redis.service({ prefix, ...openTelemetry({ tracer, parent: 'parent' }) });
    consumer.addHandler(WorkItem, () => true, 1);
    await tracer.startActiveSpan('job', async (root) => {
      await producer.enqueue(new WorkItem('child'), 0);
      root.end();
    });
    await waitFor(() => named('process test.work').length === 1, 'the consumer span');
    const [send] = named('send test.work');
    const [process] = named('process test.work');
    expect(process!.spanContext().traceId).toBe(send!.spanContext().traceId);
    expect(parentOf(process!)).toBe(send!.spanContext().spanId);
    expect(process!.links).toEqual([]);
  });

  it('marks failed attempts as errors, shows each attempt, and an event enqueued by a handler continues from its span', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(3, 10), ...openTelemetry({ tracer }) });
    service.addHandler(
      WorkItem,
      async (event, _context, delivery) => {
        if (event.id === 'flaky') {
          if (delivery.attempt === 1) throw new TypeError('gateway down');
          if (delivery.attempt === 2) return false;
          await service.enqueue(new WorkItem('follow-up'), 0);
        }
      },
      1,
    );
    await service.enqueue(new WorkItem('flaky'), 0);
    await waitFor(() => named('process test.work').length === 4, 'three attempts and the follow-up');

    const processes = named('process test.work');
    const flaky = processes
      .filter((s) => s.attributes['messaging.message.id'] === 'flaky')
      .sort((a, b) => Number(a.attributes['messaging.reactive_delayed_events.attempt']) - Number(b.attributes['messaging.reactive_delayed_events.attempt']));
    expect(flaky.map((s) => s.attributes['messaging.reactive_delayed_events.attempt'])).toEqual([1, 2, 3]);
    expect(flaky.map((s) => s.status.code)).toEqual([SpanStatusCode.ERROR, SpanStatusCode.ERROR, SpanStatusCode.UNSET]);
    expect(flaky[0]!.attributes['error.type']).toBe('TypeError');
    expect(flaky[0]!.events.some((e) => e.name === 'exception')).toBe(true);
    expect(flaky.map((s) => s.attributes['messaging.reactive_delayed_events.outcome'])).toEqual(['failure', 'failure', 'success']);
    // The follow-up's send span is a child of the third attempt's process span.
    const followUpSend = named('send test.work').find((s) => s.attributes['messaging.message.id'] === 'follow-up')!;
    expect(parentOf(followUpSend)).toBe(flaky[2]!.spanContext().spanId);
    const followUp = processes.find((s) => s.attributes['messaging.message.id'] === 'follow-up')!;
    expect(followUp.links[0]!.context.spanId).toBe(followUpSend.spanContext().spanId);
  });

  it('an enqueue that fails ends its producer span with an error, and metrics count sends and handling', async () => {
    const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 60_000 });
    const meterProvider = new MeterProvider({ readers: [reader] });
    const service = redis.service({ ...openTelemetry({ tracer, meter: meterProvider.getMeter('test') }) });
    service.addHandler(WorkItem, () => true, 1);
    await expect(service.enqueue(new WorkItem(''), 0)).rejects.toThrow(/id/);
    await service.enqueue(new WorkItem('counted'), 0);
    await waitFor(() => named('process test.work').length === 1, 'handled');
    const [failed] = named('send test.work').filter((s) => s.status.code === SpanStatusCode.ERROR);
    expect(failed!.attributes['error.type']).toBe('INVALID_EVENT');

    await reader.forceFlush();
    const names = metricExporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics.map((m) => m.descriptor.name)));
    expect(names).toEqual(expect.arrayContaining(['messaging.client.sent.messages', 'messaging.client.consumed.messages', 'messaging.process.duration']));
    await meterProvider.shutdown();
  });

  it('leaves the trace alone when nothing is active and no producer spans are asked for', () => {
    const { contextProvider } = openTelemetry({ tracer });
    expect(contextProvider(undefined)).toBeUndefined();
    expect(contextProvider({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tenant: 'acme' })).toEqual({ tenant: 'acme' });
    expect(trace.getActiveSpan()).toBeUndefined();
  });
});
