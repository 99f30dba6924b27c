import 'reflect-metadata';

export { type BatchEntry, DelayedEventService, type EnqueueOptions, type HandlerOptions } from './delayed-event-service';
export type { DelayedEventServiceOptions } from './service-options';
export { DelayedEvent, type DelayedEventInstance, type EventClass } from './delayed-event.decorator';
export type { Delay, Duration } from './duration';
export type { EventContext } from './event-context';
export type { ContextHandler, Delivery, EventHandler, HandlerResult } from './handler-invocation';
export type { Durability, EnqueueStatus } from './lua-scripts';
export { METRIC, type Metric, type MetricKind, type MetricName } from './metrics';
export type { DeadLetter } from './dead-letters';
export { type ExponentialBackoffOptions, type RetryPolicy, customBackoff, exponentialBackoff, fixedBackoff } from './retry-policy';
export {
  DelayedEventError,
  HandlerAlreadyRegisteredError,
  InvalidDelayError,
  InvalidEventError,
  InvalidOptionError,
  NotReplicatedError,
  RedisCallTimeoutError,
  PayloadTooLargeError,
  SerializationError,
  ServiceClosedError,
  UnregisteredEventClassError,
} from './errors';
