import 'reflect-metadata';

export { DelayedEventService } from './service/delayed-event-service';
export type { BatchEntry, EnqueueOptions } from './service/enqueuer';
export type { Dependency, Flow, FlowStatus } from './service/flows';
export type { ChildFailurePolicy, ChildOutcome, ChildResult } from './redis/flow-store';
export type { CancelOptions } from './service/inspection-checks';
export type { DebounceOptions, DedupeOptions, ThrottleOptions, WindowOptions } from './service/enqueue-windows';
export type { BatchHandlerOptions, HandlerOptions } from './service/handlers';
export type { BatchHandler, BatchHandlerResult, BatchResult } from './runtime/batch-consumer';
export type { PerKeyLimits, RateLimit } from './service/flow-control';
export type { LimitUse, StoredLimits } from './redis/flow-limits';
export { createInspector } from './service/create-inspector';
export { Inspector } from './service/inspector';
export type { StoredVersionFailure, StoredVersions, UpgradeReport, VerifyOptions, VerifyReport } from './service/stored-versions';
export type { InstanceHandler, InstanceInfo } from './redis/instance-registry';
export type { DeadLetter, DeadLetterPage, DueTimelineOptions, EventTarget, InspectedEvent, InspectorOptions, ListOptions } from './service/inspection-types';
export type { CleanOptions, DrainOptions, ObliterateOptions } from './service/bulk-calls';
export type { EventCounts, EventError, EventState, EventTypeInfo, StateCounts } from './redis/stored-types';
export type { CallRecords, EventLogLine } from './redis/call-records';
export type { OutcomeEvent, OutcomeKind } from './redis/outcome-streams';
export type { Explanation, ExplanationGate, GroupExplanation } from './redis/explanations';
export type { OutcomesOptions, WaitForOptions } from './service/outcome-calls';
export type { RecurringSchedule, ScheduleOptions } from './service/recurring-schedules';
export type { Overlap, SchedulePolicyOptions } from './core/schedule-policy';
export type { BackfillRange } from './service/schedule-controls';
export type { CatchUp, RecurrenceSpec } from './core/recurrence';
export type { DelayedEventServiceOptions, KeepDead } from './service/service-options';
export { DelayedEvent, type DelayedEventInstance, type DelayedEventOptions, type EventClass, type Upcaster } from './core/delayed-event.decorator';
export { DELAY_TEXT_HELP, type Delay, type Duration, parseDelayText } from './core/duration';
export type { EventContext } from './core/event-context';
export { type ContextHandler, type Delivery, type EventHandler, type HandlerResult, outcomeWritten } from './runtime/handler-invocation';
export { HANDLED_OUTCOMES, type HandledOutcome } from './runtime/outcomes';
export type { Durability, EnqueueStatus } from './redis/lua-scripts';
export { METRIC, METRIC_TAGS, type Metric, type MetricKind, type MetricName, type MetricTags } from './runtime/metrics';
export type { Logger } from './runtime/service-log';
export type { EnqueueInfo, EnqueueInstrumentation, EnqueueScope, ServiceHealth } from './service/instrumentation';
export type { DueSlot, DueTimeline } from './redis/due-timeline';
export type { ActivitySlot } from './runtime/activity-log';
export type { JsonEvent } from './core/stored-body';
export { type ExponentialBackoffOptions, type RetryPolicy, customBackoff, exponentialBackoff, fixedBackoff } from './core/retry-policy';
export {
  ContextProviderError,
  DelayedEventError,
  HandlerAlreadyRegisteredError,
  TypeInUseError,
  DeliveryAbortedError,
  WaitTimeoutError,
  type DeliveryAbortCode,
  InvalidDelayError,
  InvalidArgumentError,
  InvalidEventError,
  InvalidOptionError,
  NotReplicatedError,
  RedisCallTimeoutError,
  RedisConnectionError,
  type RedisConnectionFailure,
  PayloadTooLargeError,
  PermanentFailure,
  RateLimited,
  SerializationError,
  ServiceClosedError,
  UnregisteredEventClassError,
} from './core/errors';
export { Snoozed, type SnoozeOptions } from './core/snoozed';
