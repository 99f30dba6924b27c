import { InvalidArgumentError } from './errors';
import { GROUP_NAME_RULE, isGroupName } from './names';

/**
 * The checks of what a call is given (a page, a group, a state): one per kind
 * of input, each an InvalidArgumentError that names the argument and the rule.
 * Options of the service's constructor and of addHandler() are checked in
 * src/service/service-options.ts and raise InvalidOptionError.
 */

/** The default group's name: the type's own keys. */
const DEFAULT_GROUP = 'default';
const STATES = ['scheduled', 'ready', 'in-flight', 'dead', 'handled', 'waiting'];

/** An integer argument from `min` to `max`; `fallback` when undefined. */
export function checkIntegerArgument(name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(name, `must be an integer from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

/** A subscriber group a call names; undefined is the default group. */
export function checkGroupArgument(group: unknown): string {
  if (group === undefined) return DEFAULT_GROUP;
  if (!isGroupName(group)) throw new InvalidArgumentError('group', `must be ${GROUP_NAME_RULE}; got ${JSON.stringify(group) ?? String(group)}`);
  return group;
}

/** One of the states list() pages through. */
export function checkStateArgument(state: unknown): void {
  if (typeof state !== 'string' || !STATES.includes(state)) throw new InvalidArgumentError('state', `expected one of ${STATES.join(', ')}, got ${JSON.stringify(state) ?? String(state)}`);
}
