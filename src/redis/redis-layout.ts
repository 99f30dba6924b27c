import { InvalidOptionError } from '../core/errors';
import type { EventRoute } from '../core/delayed-event.decorator';

import type { TypeKeys } from './type-keys';
import { groupKeys, queueKeys } from './queue-key-names';

export type { TypeKeys } from './type-keys';

/**
 * The in-flight set's one member that is not a lease (lua/includes/lease-pin-constants.lua):
 * longer than a listpack-encoded sorted set may hold, it keeps the set a
 * skiplist. Its first byte, 0xFF, never occurs in UTF-8, so no id can be it.
 */
export const LEASE_PIN = Buffer.concat([Buffer.from([0xff]), Buffer.from('pin: keeps this in-flight set a skiplist, not a listpack (docs/redis-layout.md)')]);

/** The group of handlers registered without a `group` option. */
export const DEFAULT_GROUP = 'default';

/** A bucket of a queue's schedule: its events and due times (lua/includes/bucket-key.lua). */
export function bucketKey(keys: TypeKeys, bucket: string): string {
  return `${keys.schedule}:${bucket}`;
}

/** The READY events a reader of an older class version left for `version` (lua/includes/newer-key.lua). */
export function newerListKey(keys: TypeKeys, version: string | number): string {
  return `${keys.newer}:${version}`;
}

/** The READY events of one key, for a handler with the key option (lua/includes/keyed-keys.lua). */
export function keyedListKey(keys: TypeKeys, key: string): string {
  return `${keys.keyedList}${key}`;
}

/** The suffixes of the keys typeKeyOf() recognises: meta, groups, paused, handledIndex (forType). */
const TYPE_MARK_KINDS = ['m', 'groups', 'p', 'hi'] as const;
export type TypeMarkKind = (typeof TYPE_MARK_KINDS)[number];
const isTypeMarkKind = (suffix: string): suffix is TypeMarkKind => (TYPE_MARK_KINDS as readonly string[]).includes(suffix);

/** The one place that knows the Redis key layout (docs/redis-layout.md explains it). */
export class RedisLayout {
  /** Keys by tag: every enqueue and claim asks, and building seven strings each time shows in profiles. */
  private readonly byTag = new Map<string, TypeKeys>();
  /**
   * A queue's groups' keys, per queue: apart from byTag, so that no type name
   * (a type may hold '/') can be taken for a type and group.
   */
  private readonly byGroup = new WeakMap<TypeKeys, Map<string, TypeKeys>>();

  constructor(readonly prefix: string) {
    if (typeof prefix !== 'string' || !/^[A-Za-z0-9_.:-]{1,64}$/.test(prefix)) {
      throw new InvalidOptionError('prefix', `must be 1-64 characters of letters, digits, '_', '.', ':' or '-'; got ${JSON.stringify(prefix)}`);
    }
  }

  /** Hash: type -> partitions, of the types that have recurring schedules under this prefix: every instance advances them. */
  get recurringIndex(): string {
    return `${this.prefix}:recurring`;
  }

  /** Where a type's recurring schedules are kept: its only queue, or partition 0 of a partitioned type. */
  recurringOf(route: EventRoute): TypeKeys {
    return this.forType(route.type, route.partitions === 1 ? undefined : 0);
  }

  /**
   * Hash: what instances counted for `type` in the 10-second slot starting at
   * `slotStartMs` (runtime/activity-log.ts), expiring after an hour. Tagged
   * with the bare type, partitioned or not, so one pipeline reads a type's slots.
   */
  activityKey(type: string, slotStartMs: number): string {
    return `${this.prefix}:{${type}}:a:${slotStartMs / 1_000}`;
  }

  /**
   * Hash: partitions setting -> when an instance with it last said so, for
   * a type: the settings in use, so that instances with a new one move
   * events out of the partitions the others wrote (src/runtime/repartitioner.ts).
   */
  layoutOf(type: string): string {
    return `${this.prefix}:{${type}}:layout`;
  }

  /** Pub/sub channel on which enqueues announce a due time earlier than any the dispatchers know. */
  get wakeChannel(): string {
    return `${this.prefix}:wake`;
  }

  /**
   * For the Inspector's SCAN of the types in use: a pattern that matches at
   * least the keys only a type in use has (its meta hash, group registry,
   * pause flag and history index, named as forType() names them), and the
   * test of a key it returned: its tag and which of those it is, or undefined.
   */
  get typeKeysPattern(): string {
    return `${this.prefix}:{*}:[mgph]*`;
  }

  typeKeyOf(key: string): { readonly tag: string; readonly kind: TypeMarkKind } | undefined {
    const start = `${this.prefix}:{`;
    const close = key.indexOf('}', start.length);
    if (!key.startsWith(start) || close < 0 || key[close + 1] !== ':') return undefined;
    const kind = key.slice(close + 2);
    return isTypeMarkKind(kind) ? { tag: key.slice(start.length, close), kind } : undefined;
  }

  /** The keys of a type with one partition, or of partition `partition` of a partitioned type. */
  forType(type: string, partition?: number): TypeKeys {
    const tag = partition === undefined ? type : `${type}#${partition}`;
    const known = this.byTag.get(tag);
    if (known) return known;
    const keys = this.typeKeys(type, tag);
    this.byTag.set(tag, keys);
    return keys;
  }

  /**
   * A queue's meta and moving keys, to probe whether it holds anything, without
   * remembering its keys: a type's first partitions sweep probes queues it mostly
   * never uses, and remembered they would cost each handled type ~4 KB for good.
   */
  probeKeys(type: string, partition?: number): Pick<TypeKeys, 'tag' | 'meta' | 'moving'> {
    const tag = partition === undefined ? type : `${type}#${partition}`;
    const known = this.byTag.get(tag);
    if (known) return known;
    const base = `${this.prefix}:{${tag}}`;
    return { tag, meta: `${base}:m`, moving: `${base}:mv` };
  }

  private typeKeys(type: string, tag: string): TypeKeys {
    return queueKeys(type, tag, `${this.prefix}:{${tag}}`);
  }

  /**
   * The keys of subscriber group `group` of a queue (a type or one partition):
   * its own ready list, leases, retry schedule, dead letters and headers, under
   * `<base>:g:<group>:`, in the queue's hash slot; bodies stay in the queue's meta.
   */
  forGroup(queue: TypeKeys, group: string): TypeKeys {
    if (group === DEFAULT_GROUP) return queue;
    let groups = this.byGroup.get(queue);
    if (!groups) this.byGroup.set(queue, (groups = new Map()));
    const known = groups.get(group);
    if (known) return known;
    // '|' is in no type or group name: no type's tag can be a group's.
    const keys = groupKeys(queue, `${queue.tag}|${group}`, group, `${this.prefix}:{${queue.tag}}:g:${group}`);
    groups.set(group, keys);
    return keys;
  }

  /** Every partition's keys of a route; one entry for an unpartitioned type. */
  partitionsOf(route: EventRoute): TypeKeys[] {
    if (route.partitions === 1) return [this.forType(route.type)];
    return Array.from({ length: route.partitions }, (_, p) => this.forType(route.type, p));
  }

  /** The keys an event id lives under: the same id always maps to the same partition. */
  forEvent(route: EventRoute, id: string): TypeKeys {
    return route.partitions === 1 ? this.forType(route.type) : this.forType(route.type, partitionOf(id, route.partitions));
  }
}

/** FNV-1a over the id's UTF-16 code units: stable across processes and versions. */
export function partitionOf(id: string, partitions: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    hash ^= id.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % partitions;
}
