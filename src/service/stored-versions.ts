import { type DelayedEventInstance, type EventClass, eventRouteOf, eventVersioningOf } from '../core/delayed-event.decorator';
import { describe } from '../core/errors';
import type { EventCodec } from '../core/event-codec';
import { splitBodyVersion, versionedBody } from '../core/stored-body';
import type { LuaScripts } from '../redis/lua-scripts';
import type { RedisClient } from '../redis/redis-client';
import { scanBodies } from '../redis/stored-walk';
import type { RecurringStore, ScheduleDefinition } from '../redis/recurring-store';
import type { RedisLayout, TypeKeys } from '../redis/redis-layout';
import type { EventState, StoredEvents } from '../redis/stored-events';
import { occurrenceId } from './recurring-schedules';

/** verifyStored(): which events to read. */
export interface VerifyOptions {
  /** Only the events this subscriber group holds; default: every stored event of the type, once. */
  readonly group?: string;
  /** Read at most this many stored events (then the schedule templates); default: all. */
  readonly limit?: number;
}

/** A stored event (or schedule template) the current class cannot read. */
export interface StoredVersionFailure {
  /** The event's id; for a schedule template, the schedule's name. */
  readonly id: string;
  /** Where it is: its state (in `group`, when one was asked for), or `template` for a recurring schedule's template. */
  readonly state: EventState | 'template';
  /** The class version that stored it. */
  readonly version: number;
  /** Why it cannot be read (decode, upcaster or class-transformer error). */
  readonly error: string;
}

/** What verifyStored() found. */
export interface VerifyReport {
  /** Stored events and schedule templates read. */
  readonly checked: number;
  /** How many of them each class version stored. */
  readonly byVersion: Readonly<Record<number, number>>;
  /** Those the current class cannot read (the first MAX_FAILURES; see `failuresTruncated`). */
  readonly failures: readonly StoredVersionFailure[];
  /** Present, true, when more failed than `failures` lists. */
  readonly failuresTruncated?: true;
}

/** What upgradeStored() did. */
export interface UpgradeReport {
  /** Stored events and schedule templates read. */
  readonly checked: number;
  /** Bodies and templates rewritten at the current version. */
  readonly upgraded: number;
  /** Those left as they were: the current class cannot read them (as verifyStored reports). */
  readonly failures: readonly StoredVersionFailure[];
  readonly failuresTruncated?: true;
}

/** versions(): the class versions that stored a type's events and templates. */
export interface StoredVersions {
  /** Stored events read (each once, whatever groups hold it). */
  readonly events: number;
  /** How many events each version stored. */
  readonly byVersion: Readonly<Record<number, number>>;
  /** The same for the type's recurring schedule templates; absent when it has none. */
  readonly schedules?: Readonly<Record<number, number>>;
}

/** Failures listed at most: a class that reads nothing of a million events should not answer a million objects. */
export const MAX_FAILURES = 1_000;
/** Events read per HSCAN step, and rewritten per script call. */
const STEP = 1_000;

export interface StoredVersionParts {
  readonly client: RedisClient;
  readonly layout: RedisLayout;
  readonly stored: StoredEvents;
  readonly recurring: RecurringStore;
  readonly scripts: LuaScripts;
  readonly codec: EventCodec;
}

/**
 * Every stored event of the type, queue by queue (a partitioned type's
 * partitions in turn), in steps of STEP. An event may be seen twice while
 * events move (HSCAN's promise); none stored throughout is missed.
 */
async function walk(
  parts: StoredVersionParts,
  queues: readonly TypeKeys[],
  limit: number,
  visit: (keys: TypeKeys, events: Array<{ id: string; body: string }>) => Promise<boolean | void>,
): Promise<number> {
  let read = 0;
  for (const keys of queues) {
    let cursor = '0';
    do {
      // Each step under commandTimeoutMs: a step whose connection dropped would never be answered.
      const step = await parts.scripts.bounded('scan-bodies', () => scanBodies(parts.client, keys, cursor, STEP));
      cursor = step.cursor;
      const events = step.events.slice(0, Math.max(0, limit - read));
      read += events.length;
      if (events.length > 0 && (await visit(keys, events)) === false) return read;
      if (read >= limit) return read;
    } while (cursor !== '0');
  }
  return read;
}

class Findings {
  readonly byVersion: Record<number, number> = {};
  readonly failures: StoredVersionFailure[] = [];
  failed = 0;
  checked = 0;

  saw(version: number): void {
    this.checked++;
    this.byVersion[version] = (this.byVersion[version] ?? 0) + 1;
  }

  /** Whether the failure should be listed (its state is then looked up). */
  wantsFailure(): boolean {
    this.failed++;
    return this.failures.length < MAX_FAILURES;
  }

  get truncated(): { failuresTruncated?: true } {
    return this.failed > this.failures.length ? { failuresTruncated: true } : {};
  }
}

async function stateOf(parts: StoredVersionParts, keys: TypeKeys, id: string, group: string | undefined): Promise<EventState> {
  const read = await parts.stored.read(keys, id);
  if (group && read?.groups?.[group]) return read.groups[group]!;
  return read?.state ?? 'scheduled';
}

/** A schedule's template as a stored body (its occurrences are written from it) at the version it was saved with. */
function templateBody(definition: ScheduleDefinition): string {
  const payload = { ...definition.payload };
  const json = JSON.stringify(definition.context ? [0, payload, definition.context] : [0, payload]);
  return versionedBody(json, definition.eventVersion ?? 1);
}

/** Reads every stored event and template of the type with the current class and its upcasters; changes nothing. */
export async function verifyStored<T extends DelayedEventInstance>(parts: StoredVersionParts, eventClass: EventClass<T>, options: VerifyOptions): Promise<VerifyReport> {
  const route = eventRouteOf(eventClass);
  const findings = new Findings();
  const group = options.group;
  const queues = parts.layout.partitionsOf(route).map((keys) => (group ? parts.layout.forGroup(keys, group) : keys));
  await walk(parts, queues, options.limit ?? Number.POSITIVE_INFINITY, async (keys, events) => {
    for (const { id, body } of events) {
      const version = splitBodyVersion(body).version;
      findings.saw(version);
      try {
        parts.codec.decode(eventClass, id, body);
      } catch (error) {
        if (findings.wantsFailure()) findings.failures.push({ id, state: await stateOf(parts, sharedOf(parts, keys), id, group), version, error: describeDecode(error) });
      }
    }
  });
  for (const { definition } of await parts.scripts.bounded('schedules', () => parts.recurring.readAll(route))) {
    const version = definition.eventVersion ?? 1;
    findings.saw(version);
    try {
      parts.codec.decode(eventClass, occurrenceId(definition.name, 0), templateBody(definition));
    } catch (error) {
      if (findings.wantsFailure()) findings.failures.push({ id: definition.name, state: 'template', version, error: describeDecode(error) });
    }
  }
  return { checked: findings.checked, byVersion: findings.byVersion, failures: findings.failures, ...findings.truncated };
}

/**
 * Rewrites every stored body and template older than the class's version at
 * that version, in steps, each one script call fenced by the body it read
 * (lua/upgrade-bodies.lua). Running it again goes on where a crash stopped:
 * what is at the current version already is only read.
 */
export async function upgradeStored<T extends DelayedEventInstance>(parts: StoredVersionParts, eventClass: EventClass<T>): Promise<UpgradeReport> {
  const route = eventRouteOf(eventClass);
  const current = eventVersioningOf(eventClass).version;
  const findings = new Findings();
  let upgraded = 0;
  await walk(parts, parts.layout.partitionsOf(route), Number.POSITIVE_INFINITY, async (keys, events) => {
    const rewrites: Array<{ id: string; from: string; to: string }> = [];
    for (const { id, body } of events) {
      const version = splitBodyVersion(body).version;
      findings.saw(version);
      if (version >= current) continue;
      try {
        const decoded = parts.codec.decode(eventClass, id, body);
        rewrites.push({ id, from: body, to: parts.codec.encode(decoded.event, decoded.context, decoded.enqueuedAt, decoded.extras).body });
      } catch (error) {
        if (findings.wantsFailure()) findings.failures.push({ id, state: await stateOf(parts, keys, id, undefined), version, error: describeDecode(error) });
      }
    }
    // Bodies still as read are rewritten, each keeping its state (lua/upgrade-bodies.lua).
    if (rewrites.length > 0) upgraded += await parts.scripts.call('upgrade-bodies', keys, { bodies: rewrites });
  });
  const keys = parts.layout.recurringOf(route);
  for (const { definition, json } of await parts.scripts.bounded('schedules', () => parts.recurring.readAll(route))) {
    const version = definition.eventVersion ?? 1;
    findings.saw(version);
    if (version >= current) continue;
    const upgradedTemplate = await upgradeTemplate(parts, eventClass, keys, definition, json);
    if (upgradedTemplate === true) upgraded++;
    else if (upgradedTemplate !== false && findings.wantsFailure()) findings.failures.push({ id: definition.name, state: 'template', version, error: upgradedTemplate });
  }
  return { checked: findings.checked, upgraded, failures: findings.failures, ...findings.truncated };
}

/**
 * One template at the class's version, written if its definition is still
 * the one read; one advanced meanwhile (its `next` moved) is read again, a
 * few times. True when rewritten, false when it changed under us each time or
 * is gone, or why it cannot be read.
 */
async function upgradeTemplate(parts: StoredVersionParts, eventClass: EventClass, keys: TypeKeys, first: ScheduleDefinition, firstJson: string): Promise<boolean | string> {
  let definition = first;
  let json = firstJson;
  for (let tries = 0; tries < 5; tries++) {
    let payload: Record<string, unknown>;
    let version: number;
    try {
      const decoded = parts.codec.decode(eventClass, occurrenceId(definition.name, 0), templateBody(definition));
      const encoded = parts.codec.encode(decoded.event, decoded.context, 0);
      version = encoded.version;
      payload = (JSON.parse(splitBodyVersion(encoded.body).json) as [number, Record<string, unknown>])[1];
    } catch (error) {
      return describeDecode(error);
    }
    const { eventVersion: _old, ...rest } = definition;
    const next: ScheduleDefinition = { ...rest, payload, ...(version > 1 ? { eventVersion: version } : {}) };
    // Rewritten only if still as read (lua/upgrade-schedule.lua).
    if ((await parts.scripts.call('upgrade-schedule', keys, { name: definition.name, read: json, toStore: JSON.stringify(next) })) === 1) return true;
    const again = await parts.scripts.bounded('schedules', () => parts.recurring.read({ type: definition.type, partitions: definition.partitions }, definition.name));
    if (!again || (again.definition.eventVersion ?? 1) >= version) return false;
    definition = again.definition;
    json = again.json;
  }
  return false;
}

/** versions(): counts by class version of a type's stored events (each once) and templates; reads no class. */
export async function storedVersions(
  parts: Pick<StoredVersionParts, 'client' | 'stored' | 'recurring' | 'scripts'>,
  queues: readonly TypeKeys[],
  route: { type: string; partitions: number },
): Promise<StoredVersions> {
  const byVersion: Record<number, number> = {};
  let events = 0;
  await walk(parts as StoredVersionParts, queues, Number.POSITIVE_INFINITY, async (_keys, step) => {
    for (const { body } of step) {
      const version = splitBodyVersion(body).version;
      byVersion[version] = (byVersion[version] ?? 0) + 1;
      events++;
    }
  });
  const templates = await parts.scripts.bounded('schedules', () => parts.recurring.readAll(route));
  if (templates.length === 0) return { events, byVersion };
  const schedules: Record<number, number> = {};
  for (const { definition } of templates) schedules[definition.eventVersion ?? 1] = (schedules[definition.eventVersion ?? 1] ?? 0) + 1;
  return { events, byVersion, schedules };
}

function sharedOf(parts: StoredVersionParts, keys: TypeKeys): TypeKeys {
  return keys.meta === keys.sharedMeta ? keys : parts.layout.forType(keys.type, keys.queueTag === keys.type ? undefined : Number(keys.queueTag.slice(keys.type.length + 1)));
}

function describeDecode(error: unknown): string {
  return error instanceof Error ? error.message : describe(error);
}
