import { InvalidArgumentError, InvalidOptionError } from './errors';

/**
 * The keys an options object may hold, one allow-list per kind of options
 * object: written `{ ... } satisfies AllowedKeys<Options>`, so the type checker
 * fails when the list and the interface part (a key added to one and not the
 * other). A misspelt key (`priorty`) must not be ignored: it would do nothing
 * and nobody would know.
 */
export type AllowedKeys<T> = { readonly [K in keyof Required<T>]: true };

/** The first own key of `options` that `allowed` does not list, even one whose value is undefined. */
export function unknownKey(options: object, allowed: Readonly<Record<string, true>>): string | undefined {
  for (const key of Object.keys(options)) if (!Object.hasOwn(allowed, key)) return key;
  return undefined;
}

/** What to say of an unknown key: the allowed key it is closest to, if it is close, and every allowed key. */
export function unknownKeyDetail(key: string, allowed: Readonly<Record<string, true>>, of: string): string {
  const keys = Object.keys(allowed);
  const near = closest(key, keys);
  return `${of} has no option ${JSON.stringify(key)}${near ? ` (did you mean ${near}?)` : ''}; its options are ${keys.join(', ')}`;
}

/** The key `key` most likely misspells: within two edits, or the same but for case. */
function closest(key: string, keys: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of keys) {
    const d = candidate.toLowerCase() === key.toLowerCase() ? 0 : distance(key, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Edits (insert, delete, replace, swap two neighbours) from `a` to `b`; gives up past 3. */
function distance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2 || a.length > 64 || b.length > 64) return 3;
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** What an options object is when it is no plain object, for a message. */
function kindOf(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

/**
 * Options of a constructor, a handler or a tool (undefined: none): an object
 * whose every key is one `allowed` lists, or an InvalidOptionError that names
 * the key, the one it may misspell and those allowed. `what` names whose
 * options they are.
 */
export function checkOptionKeys(options: unknown, allowed: Readonly<Record<string, true>>, what: string): void {
  if (options === undefined) return;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError(what, `must be an object such as { ${Object.keys(allowed).join(', ')} }, got ${kindOf(options)}`);
  }
  const key = unknownKey(options, allowed);
  if (key !== undefined) throw new InvalidOptionError(JSON.stringify(key), unknownKeyDetail(key, allowed, what));
}

/** A call's options object (undefined: none), checked as checkOptionKeys does; an InvalidArgumentError. */
export function checkArgumentKeys(options: unknown, allowed: Readonly<Record<string, true>>, what: string): void {
  if (options === undefined) return;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError(`options of ${what}`, `must be an object such as { ${Object.keys(allowed).join(', ')} }, got ${kindOf(options)}`);
  }
  const key = unknownKey(options, allowed);
  if (key !== undefined) throw new InvalidArgumentError(`option ${JSON.stringify(key)}`, unknownKeyDetail(key, allowed, what));
}
