import { SpanStatusCode } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, HANDLED_OUTCOMES, METRIC, type Metric, RateLimited, fixedBackoff } from '../src';
import { openTelemetry } from '../src/integrations/opentelemetry';
import { registerPrometheusMetrics } from '../src/integrations/prometheus';
import { Registry } from 'prom-client';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

@DelayedEvent('test.outcomes')
class Call {
  constructor(readonly id: string = '') {}
}

/**
 * What became of a call is named as what it is, on every surface
 * (docs/api.md, "Outcomes"): success, failure, snoozed, rate-limited, stale.
 * A call that asked for a hold, snoozed, or whose event was cancelled while it
 * ran is never a success.
 */
describe('outcomes', () => {
  const redis = useRedis();

  it('metrics, the activity charts and OpenTelemetry spans say success, failure, snoozed, rate-limited and stale', async () => {
    expect(HANDLED_OUTCOMES).toEqual(['success', 'failure', 'snoozed', 'rate-limited', 'stale']);
    const exporter = new InMemorySpanExporter();
    const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('outcomes');
    const prefix = redis.prefix();
    const service = redis.service({ prefix, pollIntervalMs: 20, retry: fixedBackoff(1, 10), ...openTelemetry({ tracer }) });
    const registry = new Registry();
    const prometheus = registerPrometheusMetrics(service, { registry });
    const counted: Array<{ id: string; outcome: string }> = [];
    const timed: string[] = [];
    let running = '';
    service.metrics$.subscribe((m: Metric) => {
      if (m.name === METRIC.handled) counted.push({ id: running, outcome: String(m.tags.outcome) });
      if (m.name === METRIC.handlerDuration) timed.push(String(m.tags.outcome));
    });
    let release: (() => void) | undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started = '';
    const calls = new Map<string, number>();
    service.addHandler(Call, async (event, _context, delivery) => {
      started = event.id;
      running = event.id;
      const call = (calls.get(event.id) ?? 0) + 1;
      calls.set(event.id, call);
      if (event.id === 'ok') return true;
      if (event.id === 'fails') throw new Error('no');
      if (event.id === 'snoozes' && delivery.snoozes === 0) return delivery.snooze(10);
      if (event.id === 'snoozes') return true;
      if (event.id === 'held' && call === 1) {
        // Returns as a success would, but asked for a hold: rate-limited, not a success.
        delivery.rateLimited(20);
        return true;
      }
      if (event.id === 'thrown-hold' && call === 1) throw new RateLimited(20);
      if (event.id === 'cancelled') await held;
      return true;
    });
    const one = async (id: string, expected: string[]) => {
      const before = counted.length;
      await service.enqueue(new Call(id), 0);
      await waitFor(() => counted.length - before === expected.length, `${id} counted`);
      expect(
        counted.slice(before).map((c) => c.outcome),
        id,
      ).toEqual(expected);
    };
    await one('ok', ['success']);
    await one('fails', ['failure']);
    await one('snoozes', ['snoozed', 'success']);
    await one('held', ['rate-limited', 'success']);
    await one('thrown-hold', ['rate-limited', 'success']);
    // Cancelled while its call runs: the result is fenced off.
    const before = counted.length;
    await service.enqueue(new Call('cancelled'), 0);
    await waitFor(() => started === 'cancelled', 'the call running');
    expect(await service.cancel(Call, 'cancelled')).toBe(true);
    release?.();
    await waitFor(() => counted.length > before, 'the stale result counted');
    expect(counted[before]?.outcome).toBe('stale');
    await waitFor(() => timed.length === counted.length, 'every call timed');
    expect(timed).toEqual(counted.map((c) => c.outcome));

    // Each span says the same, and only a failure is an error.
    const spans = await waitFor(() => {
      const done = exporter.getFinishedSpans().filter((s) => s.name === 'process test.outcomes');
      return done.length === counted.length ? done : undefined;
    }, 'a span per call');
    const byOutcome = (outcome: string) => spans.filter((s) => s.attributes['messaging.reactive_delayed_events.outcome'] === outcome);
    expect(byOutcome('success')).toHaveLength(4);
    expect(byOutcome('failure')).toHaveLength(1);
    expect(byOutcome('snoozed')).toHaveLength(1);
    expect(byOutcome('rate-limited')).toHaveLength(2);
    expect(byOutcome('stale')).toHaveLength(1);
    expect(spans.filter((s) => s.status.code === SpanStatusCode.ERROR).map((s) => s.attributes['messaging.message.id'])).toEqual(['fails']);

    // Prometheus's handled_total says the same, by outcome.
    const text = await registry.metrics();
    const handledTotal = (outcome: string) => Number(new RegExp(`^delayed_events_handled_total\\{[^}]*outcome="${outcome}"[^}]*\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
    expect(Object.fromEntries(HANDLED_OUTCOMES.map((o) => [o, handledTotal(o)]))).toEqual({ success: 4, failure: 1, snoozed: 1, 'rate-limited': 2, stale: 1 });
    prometheus.unregister();

    // The activity charts count the same, once the instance wrote its last slot.
    await service.close();
    const slots = await redis.service({ prefix }).activity(Call, 60_000);
    const sum = (field: 'handled' | 'failed' | 'snoozed' | 'rateLimited' | 'stale') => slots.reduce((n, s) => n + s[field], 0);
    expect({ handled: sum('handled'), failed: sum('failed'), snoozed: sum('snoozed'), rateLimited: sum('rateLimited'), stale: sum('stale') }).toEqual({
      handled: 4,
      failed: 1,
      snoozed: 1,
      rateLimited: 2,
      stale: 1,
    });
  });
});
