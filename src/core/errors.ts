/** Base of every error this library throws on purpose; `code` is stable for programs to match on. */
export class DelayedEventError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class InvalidDelayError extends DelayedEventError {
  constructor(detail: string) {
    super('INVALID_DELAY', `Invalid delay: ${detail}. Pass a finite number of milliseconds >= 0, a duration such as { hours: 3 }, or a valid Date.`);
  }
}

export class InvalidEventError extends DelayedEventError {
  constructor(detail: string) {
    super('INVALID_EVENT', `Invalid event: ${detail}.`);
  }
}

export class UnregisteredEventClassError extends DelayedEventError {
  constructor(className: string) {
    super('UNREGISTERED_EVENT_CLASS', `Class ${className || '(anonymous)'} has no @DelayedEvent('type.name') decorator; add one so its events have a stable type name in Redis.`);
  }
}

export class SerializationError extends DelayedEventError {
  /** `what`: what could not be serialized, when not the event itself (a call's result or progress, since 0.6). */
  constructor(type: string, cause: unknown, what = 'Event') {
    super('SERIALIZATION_FAILED', `${what} of type '${type}' cannot be serialized to JSON (${describe(cause)}); remove circular references, BigInts and other non-JSON values.`);
  }
}

export class PayloadTooLargeError extends DelayedEventError {
  constructor(type: string, bytes: number, limit: number) {
    super('PAYLOAD_TOO_LARGE', `Event of type '${type}' serializes to ${bytes} bytes, over the limit of ${limit} (option maxPayloadBytes); store large data elsewhere and enqueue a reference.`);
  }
}

/** The contextProvider option threw at an enqueue: nothing was stored. `cause` is what it threw. */
export class ContextProviderError extends DelayedEventError {
  constructor(cause: unknown) {
    super('CONTEXT_PROVIDER_FAILED', `The contextProvider option threw (${describe(cause)}); nothing was stored. Fix the contextProvider, or pass the context to the enqueue call.`);
    Object.defineProperty(this, 'cause', { value: cause, enumerable: false });
  }
}

export class InvalidOptionError extends DelayedEventError {
  constructor(option: string, detail: string) {
    super('INVALID_OPTION', `Invalid option ${option}: ${detail}.`);
  }
}

/** A bad argument to an inspection or control call (a state name, a page, a type name); nothing was changed. */
export class InvalidArgumentError extends DelayedEventError {
  constructor(argument: string, detail: string) {
    super('INVALID_ARGUMENT', `Invalid ${argument}: ${detail}.`);
  }
}

export class HandlerAlreadyRegisteredError extends DelayedEventError {
  constructor(type: string, group = 'default') {
    const which = group === 'default' ? `'${type}'` : `'${type}' in group '${group}'`;
    super('HANDLER_ALREADY_REGISTERED', `A handler for ${which} is already registered on this service; call removeHandler first to replace it.`);
  }
}

/**
 * obliterate() refused: instances() shows an instance handling the type
 * (since 0.6). Advisory: an instance that is cut off, or starts a handler
 * just after the check, is not seen; `force` skips the check.
 */
export class TypeInUseError extends DelayedEventError {
  constructor(
    readonly type: string,
    /** The instances seen handling it, as `host pid id`. */
    readonly instances: readonly string[],
  ) {
    super(
      'TYPE_IN_USE',
      `Type '${type}' is handled by ${instances.length} running instance(s) (${instances.join(', ')}); stop its handlers (removeHandler, or stop those processes) and call obliterate again, or pass { force: true } to remove it while they run.`,
    );
  }
}

/** Why a handler's `delivery.signal` was aborted (since 0.6): its `reason` is a DeliveryAbortedError with this code. */
export type DeliveryAbortCode = 'timeout' | 'shutdown' | 'lease-lost';

/**
 * The `reason` of an aborted `delivery.signal` (since 0.6). `timeout`: the
 * handler timeout passed, the attempt failed. `shutdown`: close() stopped
 * waiting for the call (closeTimeoutMs); the event comes back, its attempt
 * unspent. `lease-lost`: this instance could not renew the call's lease (Redis
 * out of reach, or the process stalled) or the lease was ended meanwhile; the
 * event may run elsewhere now and this call's result changes nothing.
 */
export class DeliveryAbortedError extends DelayedEventError {
  declare readonly code: DeliveryAbortCode;
  constructor(code: DeliveryAbortCode, detail: string) {
    super(code, detail);
  }
}

/** waitFor() saw no final outcome of the event within its timeoutMs (since 0.6). */
export class WaitTimeoutError extends DelayedEventError {
  constructor(
    readonly type: string,
    readonly id: string,
    readonly timeoutMs: number,
  ) {
    super(
      'WAIT_TIMEOUT',
      `No final outcome (handled, dead-lettered or cancelled) of '${type}' event '${id}' within ${timeoutMs} ms; it may still be waiting or running: wait again, or look with find()`,
    );
  }
}

export class NotReplicatedError extends DelayedEventError {
  constructor(
    readonly acknowledged: number,
    readonly required: number,
    timeoutMs: number,
  ) {
    super(
      'NOT_REPLICATED',
      `The event is stored on the master, but only ${acknowledged} of ${required} replicas confirmed it within ${timeoutMs} ms (option durableEnqueue); it may be lost if the master fails now. Enqueueing it again is safe: a stored event is left as it is.`,
    );
  }
}

export class RedisCallTimeoutError extends DelayedEventError {
  constructor(call: string, ms: number) {
    super(
      'REDIS_TIMEOUT',
      `Redis did not answer ${call} within ${ms} ms (option commandTimeoutMs); it may be down, frozen or unreachable. An enqueue that timed out may still have been stored: enqueueing it again is safe.`,
    );
  }
}

/** Why Redis could not be reached; see classifyRedisError. */
export type RedisConnectionFailure = 'refused' | 'auth' | 'tls' | 'timeout' | 'permission' | 'other';

/**
 * Redis cannot be used: nothing listens (`refused`), it refused the
 * credentials (`auth`: WRONGPASS, NOAUTH), the TLS handshake failed (`tls`: a
 * rediss:// URL to a plain port or the reverse, an untrusted certificate),
 * it did not answer in time (`timeout`), or the ACL user may not run a
 * command the service needs (`permission`: NOPERM). `cause` is what ioredis reported.
 */
export class RedisConnectionError extends DelayedEventError {
  constructor(
    readonly reason: RedisConnectionFailure,
    detail: string,
    options?: { readonly cause?: unknown },
  ) {
    super('REDIS_CONNECTION', `Redis cannot be used (${reason}): ${detail}.`);
    if (options && 'cause' in options) Object.defineProperty(this, 'cause', { value: options.cause, writable: true, configurable: true });
  }
}

/** Sorts an error ioredis reported (on a connection or as a reply) into a RedisConnectionFailure. */
export function classifyRedisError(error: unknown): RedisConnectionFailure {
  const code = typeof error === 'object' && error !== null ? String((error as { code?: unknown }).code ?? '') : '';
  const message = error instanceof Error ? error.message : String(error);
  if (/^(WRONGPASS|NOAUTH)\b/.test(message) || /invalid (username-password pair|password)/i.test(message)) return 'auth';
  if (/^NOPERM\b/.test(message)) return 'permission';
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'refused';
  if (/^(ERR_SSL|ERR_TLS|EPROTO$|CERT_|DEPTH_ZERO|SELF_SIGNED|UNABLE_TO_VERIFY)/.test(code) || /\b(SSL|TLS)\b|wrong version number|certificate/i.test(message)) return 'tls';
  if (code === 'ETIMEDOUT' || code === 'REDIS_TIMEOUT' || /timed? ?out/i.test(message)) return 'timeout';
  return 'other';
}

export class ServiceClosedError extends DelayedEventError {
  constructor() {
    super('SERVICE_CLOSED', 'The DelayedEventService is closed; create a new one.');
  }
}

const PERMANENT = Symbol.for('reactive-delayed-events:permanent');

/**
 * Throw it from a handler (or reject with it, or error an Observable with it)
 * to fail the event for good: it is dead-lettered at once, whatever attempts
 * are left, with `permanent failure: <reason>` as its error. For failures a
 * retry cannot fix, such as a declined card or an event that makes no sense.
 *
 * Recognised by a brand on its prototype (what `instanceof` finds, and more),
 * so a copy of this class from another build of the package (ESM and
 * CommonJS side by side) works too.
 */
export class PermanentFailure extends Error {
  constructor(reason: string, options?: { readonly cause?: unknown }) {
    super(reason, options);
    this.name = 'PermanentFailure';
  }

  /**
   * Whether `error` is a PermanentFailure, from this copy of the package or
   * another. Never throws: a handler may reject with a Proxy whose traps do.
   */
  static is(error: unknown): error is PermanentFailure {
    try {
      // Its instances carry the mark on their prototype: no `instanceof`, whose self-reference would have the bundle rename the class.
      return typeof error === 'object' && error !== null && (error as { [PERMANENT]?: unknown })[PERMANENT] === true;
    } catch {
      return false;
    }
  }
}
// On the prototype, not each instance: subclasses inherit it, and it stays out of logged errors.
Object.defineProperty(PermanentFailure.prototype, PERMANENT, { value: true });

const RATE_LIMITED = Symbol.for('reactive-delayed-events:rate-limited');
/** The longest a handler may hold its queue back (a day); a hold asked for outside 1 ms to this is read as one second. */
export const MAX_RATE_LIMITED_MS = 86_400_000;
/** The hold used when the one asked for is no number of ms from 1 to a day (a Retry-After misread, say). */
export const DEFAULT_RATE_LIMITED_MS = 1_000;

/**
 * Thrown (or rejected with) by a handler whose provider said "too many
 * requests": the event goes back to READY without spending an attempt, and
 * no instance starts another call of the type (and group) for `retryAfterMs`
 * (e.g. from an HTTP 429's Retry-After). The same as `delivery.rateLimited(ms)`.
 */
export class RateLimited extends Error {
  readonly retryAfterMs: number;

  constructor(retryAfterMs: number, reason = `rate-limited for ${retryAfterMs} ms`) {
    super(reason);
    this.name = 'RateLimited';
    this.retryAfterMs = retryAfterMs;
  }

  /** The hold `error` asks for, when it is a RateLimited (from any copy of the package); undefined otherwise. Never throws. */
  static holdOf(error: unknown): number | undefined {
    return rateLimitedAsk(error)?.ms;
  }
}

/**
 * The hold a RateLimited (from any copy of the package) asks for, made safe,
 * and, when what it asked for was out of range, that value as text; undefined
 * for anything else. Never throws.
 */
export function rateLimitedAsk(error: unknown): RateLimitedHold | undefined {
  try {
    if (!(error instanceof RateLimited) && !(typeof error === 'object' && error !== null && (error as { [RATE_LIMITED]?: unknown })[RATE_LIMITED] === true)) return undefined;
    return rateLimitedHoldOf((error as { retryAfterMs?: unknown }).retryAfterMs);
  } catch {
    // A value that throws when looked at (a hostile Proxy) is no RateLimited.
    return undefined;
  }
}
Object.defineProperty(RateLimited.prototype, RATE_LIMITED, { value: true });

/** A hold asked for, as used: `ms`; `refused`, the value asked for as text when it was out of range. */
export interface RateLimitedHold {
  readonly ms: number;
  readonly refused?: string;
}

/**
 * A hold asked for, made safe: a finite number of ms from 1 to a day is held
 * (whole ms, rounded up); anything else (above a day, below 1, NaN, a string)
 * holds for one second, and says what was asked.
 */
export function rateLimitedHoldOf(ms: unknown): RateLimitedHold {
  if (typeof ms === 'number' && Number.isFinite(ms) && ms >= 1 && ms <= MAX_RATE_LIMITED_MS) return { ms: Math.ceil(ms) };
  return { ms: DEFAULT_RATE_LIMITED_MS, refused: printable(ms) };
}

/** A hold asked for, made safe (rateLimitedHoldOf), in ms. */
export function rateLimitedHold(ms: unknown): number {
  return rateLimitedHoldOf(ms).ms;
}

/** A short text of any value, for a log record; never throws. */
function printable(value: unknown): string {
  try {
    const text = typeof value === 'string' ? JSON.stringify(value) : typeof value === 'bigint' ? `${value}n` : String(value);
    return text.length > 64 ? `${text.slice(0, 64)}…` : text;
  } catch {
    return UNPRINTABLE;
  }
}

export function describe(error: unknown): string {
  // Whatever a handler throws is described here, so nothing here may throw: a
  // message getter, a Proxy trap or a toString that throws gives 'unprintable error'.
  try {
    if (typeof error === 'string') return error;
    if (error instanceof Error) {
      const text = `${String(error.name)}: ${String(error.message)}`;
      return typeof text === 'string' ? text : UNPRINTABLE;
    }
    try {
      const json = JSON.stringify(error);
      if (typeof json === 'string') return json;
    } catch {
      // A cycle, a BigInt, a throwing toJSON: String() below.
    }
    return String(error);
  } catch {
    return UNPRINTABLE;
  }
}

/** The most bytes of an error's text that is stored (last error, error log, dead letters) or logged. */
export const MAX_ERROR_BYTES = 8_192;

/**
 * An error's text as stored and logged: at most MAX_ERROR_BYTES of UTF-8,
 * cut on a character boundary, ending `… (N bytes cut)` when it was longer.
 * A handler that throws a 5 MB message must not store 5 MB per attempt.
 */
export function boundErrorText(text: string, maxBytes = MAX_ERROR_BYTES): string {
  // Three bytes at most per UTF-16 unit: a text this short cannot be over the bound.
  if (text.length * 3 <= maxBytes) return text;
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  // The suffix's own length, with the widest count it can show.
  let keep = maxBytes - Buffer.byteLength(`… (${bytes.length} bytes cut)`);
  // Back to the start of a character: UTF-8 continuation bytes are 10xxxxxx.
  while (keep > 0 && ((bytes[keep] ?? 0) & 0xc0) === 0x80) keep--;
  return `${bytes.subarray(0, keep).toString('utf8')}… (${bytes.length - keep} bytes cut)`;
}

/** What describe() says of a value that throws when looked at. */
export const UNPRINTABLE = 'unprintable error';
