import type { DelayedEventInstance, EventClass } from '../core/delayed-event.decorator';
import type { TypeKeys } from '../redis/redis-layout';
import { type BatchSettings, BatchConsumer } from '../runtime/batch-consumer';
import { Consumer, type ConsumerParts } from '../runtime/consumer';
import type { Dispatcher } from '../runtime/dispatcher';
import { type EventHandler, passThroughContextHandler } from '../runtime/handler-invocation';
import type { KeyLabels } from '../runtime/key-labels';
import { LuaScripts } from '../redis/lua-scripts';
import { METRIC } from '../runtime/metrics';
import { type HandlersParts, type PartitionHost, type PartitionSpec, type PartitionWiring, wirePartition } from './partition-wiring';
import type { LiveLoops } from './queue-loops';

/** What a handler's loops are made of, each time they are made (added, or woken from parked). */
export interface HandlerLoopsPlan<T extends DelayedEventInstance> {
  readonly eventClass: EventClass<T>;
  readonly handler: EventHandler<T>;
  readonly batch: BatchSettings<T> | undefined;
  readonly specs: readonly PartitionSpec[];
  readonly wiring: PartitionWiring;
  /** Made once per registration: the labels stay bounded across the loops made again. */
  readonly keyLabels: KeyLabels<T> | undefined;
  /** A hold set here ended (src/runtime/hold-ends.ts). */
  readonly onHoldEnded: (keys: TypeKeys) => void;
  /** Starts the consumer: at once, or once the handler's limits are stored (Handlers.add). */
  readonly startConsumer: (consumer: Consumer<DelayedEventInstance>) => void;
}

/** A handler's dispatchers, readers and consumer, wired over its partitions and started. */
export function startLoops<T extends DelayedEventInstance>(host: PartitionHost, plan: HandlerLoopsPlan<T>): LiveLoops {
  const { parts } = host;
  const handlerPlan = plan.wiring.plan;
  const dispatchers: Dispatcher[] = [];
  // The consumer is made below, once its queues are wired.
  let consumer: Consumer<T> | undefined;
  const running = () => (consumer?.running ?? 0) > 0;
  const queues = plan.specs.map((spec) => {
    const wired = wirePartition(host, spec, plan.wiring, running);
    dispatchers.push(...wired.dispatchers);
    return wired.queue;
  });
  const consumerParts: ConsumerParts<T> = {
    type: handlerPlan.type,
    group: handlerPlan.group,
    queues,
    eventClass: plan.eventClass,
    handler: plan.handler,
    parallelism: handlerPlan.slots,
    prefetch: handlerPlan.prefetch,
    timeoutMs: handlerPlan.timeoutMs,
    heartbeat: { everyMs: handlerPlan.heartbeatMs, leaseMs: handlerPlan.heartbeatLeaseMs },
    ...(plan.keyLabels ? { keyLabels: plan.keyLabels } : {}),
    retry: handlerPlan.retry,
    maxSnoozes: handlerPlan.maxSnoozes,
    keepDead: handlerPlan.keepDead,
    scripts: plan.wiring.scripts,
    codec: parts.codec,
    metrics: parts.metrics,
    contextStore: parts.contextStore,
    contextHandler: parts.options.contextHandler ?? passThroughContextHandler,
    ...(parts.activity ? { activity: parts.activity.of(handlerPlan.type) } : {}),
    limited: handlerPlan.countsRunning,
    onHoldEnded: plan.onHoldEnded,
    errands: parts.errands,
  };
  consumer = plan.batch ? new BatchConsumer<T>(consumerParts, plan.batch) : new Consumer<T>(consumerParts);
  for (const dispatcher of dispatchers) dispatcher.start();
  const live: LiveLoops = {
    consumer: consumer as unknown as Consumer<DelayedEventInstance>,
    dispatchers,
    readers: queues.map((q) => ({ queueTag: q.keys.queueTag, reader: q.reader })),
  };
  plan.startConsumer(live.consumer);
  return live;
}

/** The scripts of the handlers' loops, on the handlers' own connection: a call stuck past its deadline replaces that connection. */
export function handlingScripts(parts: HandlersParts): LuaScripts {
  const { options, connections, layout, metrics, log } = parts;
  return new LuaScripts(
    connections.handling,
    layout.wakeChannel,
    {
      ms: options.commandTimeoutMs,
      onStuck: () => {
        metrics.count(METRIC.redisCallTimeouts, { connection: 'owned' });
        connections.resetHandlingConnection();
      },
    },
    options.idempotencyWindowMs,
    undefined,
    (error) => log.refused(error),
    options.keepHandled,
    options.outcomesMaxLen,
  );
}
