import 'reflect-metadata';
import { InvalidArgumentError, UnregisteredEventClassError } from './errors';
import { TYPE_NAME_RULE, isTypeName } from './names';
import { type AllowedKeys, checkOptionKeys } from './option-keys';

const ROUTE = Symbol.for('reactive-delayed-events:route');
const VERSIONING = Symbol.for('reactive-delayed-events:versioning');

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
   * later moves stored events to their new partitions: instances with the new
   * setting do it as they start (docs/changing-event-classes.md).
   */
  readonly partitions?: number;
  /**
   * The version of the class's stored shape; default 1. Every event is stored
   * with the version that wrote it, and read back through `upcast` when it is
   * older. An instance never claims an event of a newer version than its
   * class: it leaves it for one that can read it (docs/changing-event-classes.md).
   */
  readonly version?: number;
  /**
   * `upcast[n]` turns the stored plain object of version `n` (its `id`
   * included) into version `n + 1`, for each `n` below `version`. An event
   * stored before versions existed is version 1. A step that is missing makes
   * events of that version unreadable (verifyStored reports them), never read wrongly.
   */
  readonly upcast?: Readonly<Record<number, Upcaster>>;
}

/** One step of an event's stored shape: the plain object of one version to the next. */
export type Upcaster = (stored: Record<string, unknown>) => Record<string, unknown>;

/** A class's stored-shape version and the steps that read older ones. */
export interface EventVersioning {
  readonly version: number;
  readonly upcast: Readonly<Record<number, Upcaster>>;
}

/** What an event's version may be: stored in every body of version 2 and up, as its first digits. */
export const MAX_EVENT_VERSION = 1_000_000;
const UNVERSIONED: EventVersioning = { version: 1, upcast: {} };

/** Where a type's events live: its stored name and how many partitions it has. */
export interface EventRoute {
  readonly type: string;
  readonly partitions: number;
}

const MAX_PARTITIONS = 1_024;

const DECORATOR_OPTION_KEYS = { partitions: true, version: true, upcast: true } as const satisfies AllowedKeys<DelayedEventOptions>;

/**
 * Names the event type stored in Redis. The name, not the class name, is the
 * contract: minifiers and refactors may rename classes, stored events stay readable.
 */
export function DelayedEvent(typeName: string, options: DelayedEventOptions = {}): ClassDecorator {
  if (!isTypeName(typeName)) {
    throw new InvalidArgumentError('typeName', `@DelayedEvent type name must be ${TYPE_NAME_RULE}; got ${JSON.stringify(typeName)}`);
  }
  checkOptionKeys(options, DECORATOR_OPTION_KEYS, `@DelayedEvent('${typeName}')`);
  const partitions = options.partitions ?? 1;
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > MAX_PARTITIONS) {
    throw new TypeError(`@DelayedEvent('${typeName}') partitions must be an integer from 1 to ${MAX_PARTITIONS}; got ${String(partitions)}`);
  }
  const route: EventRoute = { type: typeName, partitions };
  const versioning = checkVersioning(typeName, options);
  return (target) => {
    Reflect.defineMetadata(ROUTE, route, target);
    Reflect.defineMetadata(VERSIONING, versioning, target);
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

/** The class's version and upcasters: version 1 and none for a class declared without. */
export function eventVersioningOf(eventClass: Function): EventVersioning {
  const versioning: unknown = typeof eventClass === 'function' ? Reflect.getOwnMetadata(VERSIONING, eventClass) : undefined;
  return (versioning as EventVersioning | undefined) ?? UNVERSIONED;
}

function checkVersioning(typeName: string, options: DelayedEventOptions): EventVersioning {
  const version = options.version ?? 1;
  if (!Number.isInteger(version) || version < 1 || version > MAX_EVENT_VERSION) {
    throw new InvalidArgumentError('version', `@DelayedEvent('${typeName}') version must be an integer from 1 to ${MAX_EVENT_VERSION}; got ${String(version)}`);
  }
  const given: unknown = options.upcast ?? {};
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    throw new InvalidArgumentError('upcast', `@DelayedEvent('${typeName}') upcast must be an object of functions by version, e.g. { 1: (v1) => v2 }`);
  }
  const upcast: Record<number, Upcaster> = {};
  for (const [key, step] of Object.entries(given as Record<string, unknown>)) {
    const from = Number(key);
    if (!Number.isInteger(from) || from < 1 || from >= version) {
      throw new InvalidArgumentError(
        'upcast',
        `@DelayedEvent('${typeName}') upcast[${key}] reads version ${key} into the next, so its key must be an integer from 1 to ${version - 1} (below version ${version})`,
      );
    }
    if (typeof step !== 'function') throw new InvalidArgumentError('upcast', `@DelayedEvent('${typeName}') upcast[${key}] must be a function, got ${typeof step}`);
    upcast[from] = step as Upcaster;
  }
  return Object.freeze({ version, upcast: Object.freeze(upcast) });
}
