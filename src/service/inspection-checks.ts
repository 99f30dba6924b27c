import { eventRouteOf } from '../core/delayed-event.decorator';
import { checkIdArgument, checkTypeName } from '../core/names';
import type { EventTarget } from './inspection-types';

export function noCheck(): void {}

/**
 * A type (an event class, or its name), and an id, a call was given: a typed
 * error at the call for a name that could not be a type's, a class that is
 * no @DelayedEvent, or an id Redis would not store as given. Resolves the type's name.
 */
export function checkTarget(target: EventTarget): string {
  return typeof target === 'string' ? checkTypeName(target) : eventRouteOf(target).type;
}

export function checkEvent(target: EventTarget, id: string): string {
  checkIdArgument(id);
  return checkTarget(target);
}
