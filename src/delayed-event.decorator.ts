import 'reflect-metadata';
import { UnregisteredEventClassError } from './errors';

const TYPE_NAME = Symbol.for('reactive-delayed-events:type-name');

/** What every event must be: a class instance with a string id, unique within its type. */
export interface DelayedEventInstance {
  readonly id: string;
}

// Constructor parameters are irrelevant to us: class-transformer builds instances without arguments.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type EventClass<T extends DelayedEventInstance = DelayedEventInstance> = new (...args: any[]) => T;

/** Characters that would break the key layout's hash tag or its separators. */
const FORBIDDEN = /[{}\s|]/;

/**
 * Names the event type stored in Redis. The name, not the class name, is the
 * contract: minifiers and refactors may rename classes, stored events stay readable.
 */
export function DelayedEvent(typeName: string): ClassDecorator {
  if (typeof typeName !== 'string' || typeName.length === 0 || typeName.length > 200 || FORBIDDEN.test(typeName)) {
    throw new TypeError(`@DelayedEvent type name must be 1-200 characters without braces, '|' or whitespace; got ${JSON.stringify(typeName)}`);
  }
  return (target) => {
    Reflect.defineMetadata(TYPE_NAME, typeName, target);
  };
}

export function eventTypeOf(eventClass: Function): string {
  // getOwnMetadata: a subclass must declare its own type, or it would share its parent's queue.
  const name: unknown = typeof eventClass === 'function' ? Reflect.getOwnMetadata(TYPE_NAME, eventClass) : undefined;
  if (typeof name !== 'string') throw new UnregisteredEventClassError(typeof eventClass === 'function' ? eventClass.name : String(eventClass));
  return name;
}
