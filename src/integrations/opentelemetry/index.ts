import {
  type Attributes,
  type Context,
  type Counter,
  type Histogram,
  type Link,
  type Meter,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  context as otelContext,
  createTraceState,
  propagation,
  trace,
} from '@opentelemetry/api';
import { type ContextHandler, type Delivery, type EnqueueInstrumentation, type EventContext, type HandledOutcome, InvalidOptionError, outcomeWritten } from '../../index';

/** `messaging.system` of every span and metric. */
export const MESSAGING_SYSTEM = 'reactive_delayed_events';
/** Attributes of this system beyond the generic messaging ones live under this namespace (semantic conventions). */
const OWN = `messaging.${MESSAGING_SYSTEM}`;
/** Keys of the stored context that carry the W3C trace context (and baggage, when a propagator writes it). */
const TRACE_KEYS = ['traceparent', 'tracestate', 'baggage'] as const;

export interface OpenTelemetryOptions {
  /** Default: `trace.getTracer('reactive-delayed-events')` of the global tracer provider. */
  readonly tracer?: Tracer;
  /** When given, messaging metrics too: `messaging.client.sent.messages`, `messaging.client.consumed.messages`, `messaging.process.duration` (s). */
  readonly meter?: Meter;
  /**
   * How a `process` span relates to the `send` span of its enqueue: 'link'
   * (default: a new trace, linked to it, as the messaging conventions
   * recommend; an event handled hours later does not stretch its producer's
   * trace) or 'parent' (a child of it, in the producer's trace).
   */
  readonly parent?: 'link' | 'parent';
}

/** Spread into DelayedEventServiceOptions: `new DelayedEventService({ redis, ...openTelemetry() })`. */
export interface OpenTelemetryInstrumentation {
  /** Writes the active span's W3C trace context (traceparent, tracestate) into each event's stored context, keeping the running handler's other fields. */
  readonly contextProvider: (current: EventContext | undefined) => EventContext | undefined;
  /** Runs each handler call inside a CONSUMER `process <type>` span. */
  readonly contextHandler: ContextHandler;
  /** A PRODUCER `send <type>` span around each enqueued event. */
  readonly instrumentEnqueue: EnqueueInstrumentation;
}

/** `00-<trace id>-<span id>-<flags>` of a span context. */
function traceparentOf(span: SpanContext): string {
  return `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The remote span context a stored traceparent names; undefined when there is none or it is malformed. */
function spanContextOf(stored: EventContext): SpanContext | undefined {
  const match = TRACEPARENT.exec(stored.traceparent?.trim() ?? '');
  if (!match || match[1] === 'ff' || (match[1] === '00' && match[5] !== undefined)) return undefined;
  const spanContext: SpanContext = {
    traceId: match[2]!,
    spanId: match[3]!,
    traceFlags: Number.parseInt(match[4]!, 16),
    isRemote: true,
    ...(stored.tracestate ? { traceState: createTraceState(stored.tracestate) } : {}),
  };
  return trace.isSpanContextValid(spanContext) ? spanContext : undefined;
}

function errorType(error: unknown): string {
  if (error instanceof Error) return (error as { code?: unknown }).code !== undefined ? String((error as { code?: unknown }).code) : error.name;
  return 'Error';
}

function attempted(span: Span, delivery: Delivery): void {
  span.setAttribute(`${OWN}.attempt`, delivery.attempt);
  span.setAttribute(`${OWN}.max_attempts`, delivery.maxAttempts);
}

/** The options, each once (the type checker holds the list to OpenTelemetryOptions): a misspelt one must not pass unnoticed. */
const OPTION_KEYS = { tracer: true, meter: true, parent: true } as const satisfies Record<keyof Required<OpenTelemetryOptions>, true>;

/**
 * OpenTelemetry tracing (and, with a meter, metrics) for the service,
 * following the messaging semantic conventions: a PRODUCER `send <type>`
 * span at each enqueue, whose W3C trace context is stored with the event, and
 * a CONSUMER `process <type>` span around each handler call, linked to it (or
 * its child, with `parent: 'parent'`), with type, id, group, attempt and
 * outcome as attributes and an ERROR status on failure. The handler runs
 * inside its span, so the application's own spans nest under it.
 */
export function openTelemetry(options: OpenTelemetryOptions = {}): OpenTelemetryInstrumentation {
  const allowed = Object.keys(OPTION_KEYS);
  if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', `must be an object such as { ${allowed.join(', ')} }`);
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) throw new InvalidOptionError(JSON.stringify(key), `openTelemetry has no such option; its options are ${allowed.join(', ')}`);
  }
  if (options.parent !== undefined && options.parent !== 'link' && options.parent !== 'parent')
    throw new InvalidOptionError('parent', `must be 'link' or 'parent', got ${JSON.stringify(options.parent)}`);
  const tracer = options.tracer ?? trace.getTracer('reactive-delayed-events');
  const asParent = options.parent === 'parent';
  const meter = options.meter;
  const sent: Counter | undefined = meter?.createCounter('messaging.client.sent.messages', { description: 'Events enqueued (sent to Redis).', unit: '{message}' });
  const consumed: Counter | undefined = meter?.createCounter('messaging.client.consumed.messages', { description: 'Events handed to handlers.', unit: '{message}' });
  const processing: Histogram | undefined = meter?.createHistogram('messaging.process.duration', { description: 'Duration of handler calls.', unit: 's' });

  const instrumentEnqueue: EnqueueInstrumentation = (info) => {
    const attributes: Attributes = {
      'messaging.system': MESSAGING_SYSTEM,
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'send',
      'messaging.destination.name': info.type,
      'messaging.message.id': info.id,
    };
    const span = tracer.startSpan(`send ${info.type}`, { kind: SpanKind.PRODUCER, attributes }, otelContext.active());
    return {
      capture: (fn) => otelContext.with(trace.setSpan(otelContext.active(), span), fn),
      end: ({ status, error }) => {
        const metricAttributes: Attributes = { 'messaging.system': MESSAGING_SYSTEM, 'messaging.operation.name': 'send', 'messaging.destination.name': info.type };
        if (error !== undefined) {
          span.recordException(error instanceof Error ? error : String(error));
          span.setAttribute('error.type', errorType(error));
          span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
          metricAttributes['error.type'] = errorType(error);
        } else if (status !== undefined) {
          span.setAttribute(`${OWN}.status`, status);
        }
        span.end();
        sent?.add(1, metricAttributes);
      },
    };
  };

  const contextProvider = (current: EventContext | undefined): EventContext | undefined => {
    const carrier: Record<string, string> = {};
    // The running handler's fields go on; its trace context is replaced by the active span's.
    if (current) for (const [key, value] of Object.entries(current)) if (!(TRACE_KEYS as readonly string[]).includes(key)) carrier[key] = value;
    const active = otelContext.active();
    const spanContext = trace.getSpanContext(active);
    if (spanContext && trace.isSpanContextValid(spanContext)) {
      carrier.traceparent = traceparentOf(spanContext);
      const state = spanContext.traceState?.serialize();
      if (state) carrier.tracestate = state;
    }
    // A global propagator (W3C, baggage, B3...) may add its own keys.
    propagation.inject(active, carrier);
    return Object.keys(carrier).length > 0 ? carrier : undefined;
  };

  const contextHandler: ContextHandler = (stored, delivery, next) => {
    const remote = spanContextOf(stored);
    // Baggage (and anything else a global propagator reads) comes along; the span is ours to set.
    const extracted: Context = trace.deleteSpan(propagation.extract(ROOT_CONTEXT, stored));
    const base = asParent && remote ? trace.setSpanContext(extracted, remote) : extracted;
    const links: Link[] = !asParent && remote ? [{ context: remote }] : [];
    const attributes: Attributes = {
      'messaging.system': MESSAGING_SYSTEM,
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': delivery.type,
      'messaging.message.id': delivery.id,
      'messaging.consumer.group.name': delivery.group,
    };
    const span = tracer.startSpan(`process ${delivery.type}`, { kind: SpanKind.CONSUMER, attributes, links }, base);
    attempted(span, delivery);
    const started = performance.now();
    let ended = false;
    // The span ends when the call did, and says what became of it once its result is written
    // (src/runtime/outcomes.ts): a snooze, a hold or a stale result is no success, and no error either.
    const finish = (outcome: HandledOutcome, error?: unknown, message?: string, endedAt: number = Date.now()) => {
      if (ended) return;
      ended = true;
      span.setAttribute(`${OWN}.outcome`, outcome);
      const metricAttributes: Attributes = {
        'messaging.system': MESSAGING_SYSTEM,
        'messaging.operation.name': 'process',
        'messaging.destination.name': delivery.type,
        'messaging.consumer.group.name': delivery.group,
        [`${OWN}.outcome`]: outcome,
      };
      if (outcome === 'failure') {
        const type = error === undefined ? 'handler_failed' : errorType(error);
        if (error !== undefined) span.recordException(error instanceof Error ? error : String(error));
        span.setAttribute('error.type', type);
        span.setStatus({ code: SpanStatusCode.ERROR, message: message ?? (error instanceof Error ? error.message : String(error)) });
        metricAttributes['error.type'] = type;
      }
      span.end(endedAt);
      consumed?.add(1, metricAttributes);
      processing?.record(durationS, metricAttributes);
    };
    let durationS = 0;
    /** The call ended: the outcome comes with the write, or is the call's own when the service did not make this Delivery. */
    const callEnded = (own: HandledOutcome, error?: unknown, message?: string) => {
      durationS = (performance.now() - started) / 1_000;
      const endedAt = Date.now();
      const written = outcomeWritten(delivery);
      if (!written) return finish(own, error, message, endedAt);
      written.then((outcome) => finish(outcome, outcome === 'failure' ? error : undefined, outcome === 'failure' ? message : undefined, endedAt));
    };
    // A handler that never finishes is given up at its timeout: its span ends then.
    delivery.signal.addEventListener(
      'abort',
      () => {
        durationS = (performance.now() - started) / 1_000;
        finish('failure', undefined, 'handler timed out');
      },
      { once: true },
    );
    return otelContext.with(trace.setSpan(base, span), async () => {
      try {
        const ok = await next();
        if (ok) callEnded('success');
        else callEnded('failure', undefined, 'handler answered false');
        return ok;
      } catch (error) {
        callEnded('failure', error);
        throw error;
      }
    });
  };

  return { contextProvider, contextHandler, instrumentEnqueue };
}
