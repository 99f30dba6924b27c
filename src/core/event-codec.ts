import { type BodyExtras, formatExtras, parseExtras } from './body-extras';
import { type ClassConstructor, instanceToPlain, plainToInstance } from 'class-transformer';
import { type DelayedEventInstance, type EventClass, type EventRoute, eventRouteOf, eventVersioningOf } from './delayed-event.decorator';
import { InvalidEventError, PayloadTooLargeError, SerializationError, describe } from './errors';
import { type EventContext, isEventContext } from './event-context';
import { FlatPayloads } from './flat-payload';
import { checkEventId } from './names';
import { splitBodyVersion, versionedBody } from './stored-body';

export interface EncodedEvent {
  readonly route: EventRoute;
  readonly type: string;
  readonly id: string;
  /**
   * JSON `[enqueued at ms, payload without its id, context?]`, after
   * `<version>|` when the class is at version 2 or up; the Lua scripts read
   * only that version (a claim leaves newer ones to readers that know them).
   */
  readonly body: string;
  /** The class's version the body was written at. */
  readonly version: number;
}

export interface DecodedEvent<T> {
  readonly event: T;
  readonly context: EventContext;
  readonly enqueuedAt: number;
  /** The version it was stored at (before upcasting). */
  readonly version: number;
  /** Its own attempts and snooze count (src/core/body-extras.ts). */
  readonly extras: BodyExtras;
}

/**
 * Keys class-transformer loses without a word: it assigns `__proto__` as the
 * prototype when writing, and skips keys named like Object.prototype's members
 * (`toString`, `valueOf`, ...) when reading back. Such an event is refused at the call.
 */
const LOSSY_KEYS = new Set(Object.getOwnPropertyNames(Object.prototype));

/** The path of the first own key of `root`'s object graph that would not survive, if any. */
function findLossyKey(root: object): string | undefined {
  const seen = new WeakSet<object>();
  const stack: Array<{ value: object; path: string }> = [{ value: root, path: 'event' }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (seen.has(value)) continue;
    seen.add(value);
    for (const key of Object.keys(value)) {
      if (LOSSY_KEYS.has(key)) return `${path}.${key}`;
      const child = (value as Record<string, unknown>)[key];
      if (child !== null && typeof child === 'object' && !(child instanceof Date)) stack.push({ value: child, path: `${path}.${key}` });
    }
  }
  return undefined;
}

/** findLossyKey for an object without nested objects: its own keys are all there is. */
function lossyOwnKey(value: object): string | undefined {
  for (const key of Object.keys(value)) if (LOSSY_KEYS.has(key)) return `event.${key}`;
  return undefined;
}

const NO_EXTRAS: BodyExtras = Object.freeze({});

/** A stored body that cannot become an event again; the consumer dead-letters it with this reason. */
export class DecodeError extends Error {}

/** The body 0.1 wrote: `{t: enqueued at ms, c?: context, p: payload with its id}`; still read. */
interface ObjectBody {
  t?: unknown;
  c?: unknown;
  p?: unknown;
}

export class EventCodec {
  private readonly flat = new FlatPayloads();
  /** Event classes seen to build without arguments. */
  private readonly buildable = new WeakSet<Function>();

  constructor(private readonly maxPayloadBytes: number) {}

  /**
   * Events are read back with `new EventClass()`, no arguments, then filled in
   * (class-transformer's way). A class whose constructor throws without them
   * could never be handled: every event of it would be dead-lettered. Refused
   * at the call instead; checked once per class.
   */
  assertBuildable(eventClass: Function): void {
    if (this.buildable.has(eventClass)) return;
    try {
      new (eventClass as new () => unknown)();
    } catch (error) {
      const name = eventClass.name || '(anonymous class)';
      throw new InvalidEventError(
        `${name} cannot be built without arguments (${describe(error)}); events are read back with new ${name}() and then filled in, so give every constructor parameter a default`,
      );
    }
    this.buildable.add(eventClass);
  }

  encode(event: DelayedEventInstance, context: EventContext | undefined, enqueuedAt: number, extras: BodyExtras = {}): EncodedEvent {
    if (event === null || typeof event !== 'object') throw new InvalidEventError(`expected an instance of a @DelayedEvent class, got ${event === null ? 'null' : typeof event}`);
    const route = eventRouteOf(event.constructor);
    this.assertBuildable(event.constructor);
    const type = route.type;
    const version = eventVersioningOf(event.constructor).version;
    const id: unknown = event.id;
    if (typeof id !== 'string' || id.length === 0) {
      throw new InvalidEventError(`${event.constructor.name} has id ${JSON.stringify(id) ?? String(id)}; every event needs a non-empty string id, unique within type '${type}'`);
    }
    checkEventId(id, type);
    if (context !== undefined && !isEventContext(context)) {
      throw new InvalidEventError('context must be an object whose values are all strings');
    }
    let body: string;
    try {
      // The hash field is the id already; a second copy in every body is memory for nothing.
      const flat = this.flat.toPlain(event, 'id');
      const lossy = flat ? lossyOwnKey(event) : findLossyKey(event);
      if (lossy) throw new SerializationError(type, new Error(`key ${lossy} would be dropped by class-transformer when stored or read back; rename it`));
      const payload: Record<string, unknown> = flat ?? instanceToPlain(event);
      if (!flat && payload.id === id) delete payload.id;
      const hasContext = context !== undefined && Object.keys(context).length > 0;
      const extra = formatExtras(extras);
      // The extras go fourth, after a context ({} when there is none): see src/core/body-extras.ts.
      body = JSON.stringify(extra !== undefined ? [enqueuedAt, payload, hasContext ? context : {}, extra] : hasContext ? [enqueuedAt, payload, context] : [enqueuedAt, payload]);
      body = versionedBody(body, version);
    } catch (error) {
      if (error instanceof SerializationError) throw error;
      // BigInt throws a TypeError; a circular graph overflows the stack in class-transformer.
      throw new SerializationError(type, error);
    }
    // A UTF-16 code unit is at most 3 UTF-8 bytes: most bodies need no count.
    if (body.length * 3 > this.maxPayloadBytes) {
      const bytes = Buffer.byteLength(body, 'utf8');
      if (bytes > this.maxPayloadBytes) throw new PayloadTooLargeError(type, bytes, this.maxPayloadBytes);
    }
    return { route, type, id, body, version };
  }

  decode<T extends DelayedEventInstance>(eventClass: EventClass<T>, id: string, body: string): DecodedEvent<T> {
    const { version, json } = splitBodyVersion(body);
    const current = eventVersioningOf(eventClass);
    if (version > current.version) {
      throw new DecodeError(`stored at version ${version}, and ${eventClass.name} reads versions up to ${current.version}: deploy the class of version ${version} to read it`);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch (error) {
      throw new DecodeError(`stored body is not JSON (${describe(error)})`);
    }
    let enqueuedAt: unknown, payload: unknown, context: unknown;
    let extras: BodyExtras = NO_EXTRAS;
    if (Array.isArray(parsed)) {
      // Indexes, not array destructuring: that goes through the iterator protocol, once per event.
      enqueuedAt = parsed[0];
      payload = parsed[1];
      context = parsed[2];
      if (parsed.length > 3) extras = parseExtras(parsed[3]);
    } else if (parsed !== null && typeof parsed === 'object') {
      ({ t: enqueuedAt, p: payload, c: context } = parsed as ObjectBody);
    }
    if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
      throw new DecodeError('stored body has no event payload object');
    }
    let plain = payload as Record<string, unknown>;
    if (!Object.hasOwn(plain, 'id')) plain.id = id;
    for (let from = version; from < current.version; from++) plain = upcastStep(eventClass, current.upcast[from], from, plain, id);
    let event: T;
    try {
      // class-transformer types constructors with any[] arguments; ours take never[], the same in practice.
      event = this.flat.toInstance(eventClass as unknown as new () => T, plain) ?? plainToInstance(eventClass as unknown as ClassConstructor<T>, plain);
    } catch (error) {
      throw new DecodeError(`class-transformer could not build ${eventClass.name} (${describe(error)})`);
    }
    if (!(event instanceof eventClass) || event.id !== id) {
      throw new DecodeError(`payload id ${JSON.stringify(event?.id)} does not match stored id ${JSON.stringify(id)}`);
    }
    return { event, context: isEventContext(context) ? context : {}, enqueuedAt: typeof enqueuedAt === 'number' ? enqueuedAt : 0, version, extras };
  }
}

/**
 * One upcaster's step, contained: it is user code, and whatever it throws or
 * returns amiss makes the event undecodable (dead-lettered with its body and
 * version kept, for a replay after a fixed deploy), never the process fail.
 */
function upcastStep(
  eventClass: Function,
  step: ((stored: Record<string, unknown>) => Record<string, unknown>) | undefined,
  from: number,
  plain: Record<string, unknown>,
  id: string,
): Record<string, unknown> {
  if (!step) throw new DecodeError(`stored at version ${from}, and ${eventClass.name} has no upcast[${from}] to read it into version ${from + 1}`);
  let next: unknown;
  try {
    next = step(plain);
    if (next !== null && typeof next === 'object' && !Array.isArray(next)) {
      // A copy: what an upcaster returns may be frozen, shared or a proxy.
      const result: Record<string, unknown> = { ...(next as Record<string, unknown>) };
      if (!Object.hasOwn(result, 'id')) result.id = id;
      return result;
    }
  } catch (error) {
    throw new DecodeError(`upcast[${from}] of ${eventClass.name} threw (${describe(error)})`);
  }
  throw new DecodeError(`upcast[${from}] of ${eventClass.name} returned ${next === null ? 'null' : Array.isArray(next) ? 'an array' : typeof next}, not the plain object of version ${from + 1}`);
}
