import 'reflect-metadata';
import { InvalidArgumentError, UnregisteredEventClassError } from './errors';
import { TYPE_NAME_RULE, isTypeName } from './names';

const ROUTE = Symbol.for('reactive-delayed-events:route');

/** What every event must be: a class instance with a string id, unique within its type. */
export interface DelayedEventInstance {
  readonly id: string;
}

/** An event class, whatever its constructor takes: class-transformer builds instances without arguments. */
export type EventClass<T extends DelayedEventInstance = DelayedEventInstance> = new (...args: never[]) => T;

export interface DelayedEventOptions {
  /**
   * Spread the type over this many partitions, each with its own hash tag, so
   * one busy type uses every master of a Redis Cluster. Default 1. Changing it
   * later strands stored events in partitions no longer read: drain first.
   */
  readonly partitions?: number;
}

/** Where a type's events live: its stored name and how many partitions it has. */
export interface EventRoute {
  readonly type: string;
  readonly partitions: number;
}

const MAX_PARTITIONS = 1_024;

/**
 * Names the event type stored in Redis. The name, not the class name, is the
 * contract: minifiers and refactors may rename classes, stored events stay readable.
 */
export function DelayedEvent(typeName: string, options: DelayedEventOptions = {}): ClassDecorator {
  if (!isTypeName(typeName)) {
    throw new InvalidArgumentError('typeName', `@DelayedEvent type name must be ${TYPE_NAME_RULE}; got ${JSON.stringify(typeName)}`);
  }
  const partitions = options.partitions ?? 1;
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > MAX_PARTITIONS) {
    throw new TypeError(`@DelayedEvent('${typeName}') partitions must be an integer from 1 to ${MAX_PARTITIONS}; got ${String(partitions)}`);
  }
  const route: EventRoute = { type: typeName, partitions };
  return (target) => {
    Reflect.defineMetadata(ROUTE, route, target);
  };
}

export function eventRouteOf(eventClass: Function): EventRoute {
  // getOwnMetadata: a subclass must declare its own type, or it would share its parent's queue.
  const route: unknown = typeof eventClass === 'function' ? Reflect.getOwnMetadata(ROUTE, eventClass) : undefined;
  if (!route) throw new UnregisteredEventClassError(typeof eventClass === 'function' ? eventClass.name : String(eventClass));
  return route as EventRoute;
}

export function eventTypeOf(eventClass: Function): string {
  return eventRouteOf(eventClass).type;
}
