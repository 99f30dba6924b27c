import { checkGroupArgument, checkIntegerArgument } from '../core/arguments';
import { type EventClass, eventRouteOf } from '../core/delayed-event.decorator';
import { InvalidArgumentError } from '../core/errors';
import { type AllowedKeys, checkArgumentKeys } from '../core/option-keys';
import { checkIdArgument, checkTypeName } from '../core/names';
import type { EventTarget } from './inspection-types';
import type { VerifyOptions } from './stored-versions';

const VERIFY_OPTION_KEYS = { group: true, limit: true } as const satisfies AllowedKeys<VerifyOptions>;

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

/** verifyStored()'s class and options: a decorated class, `{ group?, limit? }`. */
export function checkVerifyOptions(eventClass: EventClass, options: VerifyOptions): VerifyOptions {
  eventRouteOf(eventClass);
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError('options', 'must be an object like { group, limit }');
  checkArgumentKeys(options, VERIFY_OPTION_KEYS, 'verifyStored');
  return {
    ...(options.group !== undefined ? { group: checkGroupArgument(options.group) } : {}),
    ...(options.limit !== undefined ? { limit: checkIntegerArgument('limit', options.limit, 0, 1, Number.MAX_SAFE_INTEGER) } : {}),
  };
}

/** cancel()'s options (since 0.6). */
export interface CancelOptions {
  /** A flow's parent cancelled takes the children it still waits for (and theirs) along; `false` leaves them. Default true. */
  readonly cascade?: boolean;
}
const CANCEL_OPTION_KEYS = { cascade: true } as const satisfies AllowedKeys<CancelOptions>;

/** cancel()'s `cascade`, checked: true unless `false` is given. */
export function cascadeOf(options: CancelOptions | undefined): boolean {
  checkArgumentKeys(options, CANCEL_OPTION_KEYS, 'cancel');
  const cascade = options?.cascade;
  if (cascade !== undefined && typeof cascade !== 'boolean') throw new InvalidArgumentError('cascade', `must be true or false, got ${typeof cascade}`);
  return cascade !== false;
}
