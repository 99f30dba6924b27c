import { InvalidArgumentError, InvalidEventError, InvalidOptionError } from './errors';

/**
 * What names and ids may hold, so that no two distinct ones share a Redis key,
 * a hash field or an in-process cache entry (src/redis/redis-layout.ts):
 *
 * - Type names sit inside the keys' hash tag `{type}`, with `#` before a
 *   partition and `/` before a group in the cache, and inspection SCANs
 *   patterns built from them. No braces, `|`, `#`, glob characters
 *   (`* ? [ ] \`), whitespace, control or invisible (format) characters.
 * - Group names sit in keys, metric tags and dashboard URLs: letters, digits,
 *   `_`, `.` and `-`, but not `.` or `..` alone (a path would fold them).
 * - Ids and names are sent as UTF-8: a lone UTF-16 surrogate would be sent as
 *   U+FFFD, so two ids differing only there would be one in Redis.
 * - `<schedule name>@<ms>` is the id of a recurring schedule's occurrence: an
 *   id of that shape, enqueued by hand, could take an occurrence's place.
 */
const TYPE_FORBIDDEN = /[{}|#*?[\]\\\s\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}]/u;
const TYPE_MAX = 200;
const GROUP = /^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,64}$/;
const LONE_SURROGATE = /\p{Cs}/u;
/** A recurring schedule's name (no whitespace, '@', braces, '|' or '#'), '@', and an epoch time in ms. */
const OCCURRENCE_SHAPE = /^[^\s@{}|#]{1,100}@\d{12,16}$/;

export const TYPE_NAME_RULE = `1-${TYPE_MAX} characters without braces, '|', '#', '*', '?', '[', ']', '\\', whitespace, control or invisible characters`;
export const GROUP_NAME_RULE = "1-64 letters, digits, '_', '.' or '-', not '.' or '..'";

export function isTypeName(name: unknown): name is string {
  return typeof name === 'string' && name.length > 0 && name.length <= TYPE_MAX && !TYPE_FORBIDDEN.test(name);
}

export function isGroupName(name: unknown): name is string {
  return typeof name === 'string' && GROUP.test(name);
}

/** A type name given to a call (by name, not by class): an InvalidArgumentError naming the rule otherwise. */
export function checkTypeName(name: unknown, argument = 'type'): string {
  if (!isTypeName(name)) throw new InvalidArgumentError(argument, `a type name is ${TYPE_NAME_RULE}; got ${JSON.stringify(name) ?? String(name)}`);
  return name;
}

/** A group option of the service: an InvalidOptionError naming the rule otherwise. */
export function checkGroupOption(group: unknown): string {
  if (!isGroupName(group)) throw new InvalidOptionError('group', `must be ${GROUP_NAME_RULE}; got ${JSON.stringify(group) ?? String(group)}`);
  return group;
}

/** An id a call looks up (cancel, find, reschedule...): a non-empty string Redis stores as it is. */
export function checkIdArgument(id: unknown, argument = 'id'): string {
  if (typeof id !== 'string' || id.length === 0) throw new InvalidArgumentError(argument, `must be a non-empty string; got ${JSON.stringify(id) ?? String(id)}`);
  if (LONE_SURROGATE.test(id)) throw new InvalidArgumentError(argument, `holds a lone UTF-16 surrogate, which Redis would store as U+FFFD; got ${JSON.stringify(id)}`);
  return id;
}

/** Why the id of an event being enqueued is refused, or undefined when it is fine. */
export function badEventId(id: string): string | undefined {
  if (LONE_SURROGATE.test(id)) return 'holds a lone UTF-16 surrogate, which Redis would store as U+FFFD (another id could then be the same event)';
  if (OCCURRENCE_SHAPE.test(id)) return "has the shape '<name>@<epoch ms>' that ids of recurring schedules' occurrences have";
  return undefined;
}

/** Refuses an event id that could share its place with another: InvalidEventError saying why. */
export function checkEventId(id: string, type: string): void {
  const bad = badEventId(id);
  if (bad) throw new InvalidEventError(`id ${JSON.stringify(id)} of type '${type}' ${bad}; choose another id`);
}
