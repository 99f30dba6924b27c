import type { TypeKeys } from './type-keys';

/**
 * The suffix of each key a queue's group has of its own, after
 * `<prefix>:{<tag>}` for the default group and `<prefix>:{<tag>}:g:<group>`
 * for a named one. The second part are those the scripts derive from the
 * meta key (the Lua key builders of lua/includes/: limit-keys, keyed-keys,
 * newer-key, priority-keys; test/key-builders.test.ts holds them together).
 */
const OWN_KEYS = {
  meta: ':m',
  groups: ':groups',
  schedule: ':b',
  legacySchedule: ':s',
  ready: ':r',
  inFlight: ':f',
  dead: ':d',
  errors: ':e',
  errorLog: ':el',
  handled: ':h',
  handledIndex: ':hi',
  claimLogPrefix: ':c:',

  flow: ':fc',
  rateWindow: ':rl',
  newer: ':v',
  keyedIds: ':kid',
  keyedList: ':kq:',
  keyRing: ':ring',
  keysWaiting: ':kw',
  keyRunning: ':kf:',
  keyRate: ':kr:',
  readyByPriority: ':rq',
  readyAging: ':ra',
  readySeq: ':rs',
  heartbeats: ':hl',
  progress: ':pg',
  logs: ':lg',
  handledResults: ':hr',
} as const;

/** The suffix of each key a queue's groups share, after `<prefix>:{<tag>}` (the flow keys: lua/includes/flow-keys.lua). */
const SHARED_KEYS = {
  priorityMarker: ':pq',
  pending: ':n',
  paused: ':p',
  marker: ':here',
  tombstone: ':gone',
  recurringMarker: ':sched:here',
  recurring: ':sched',
  moving: ':mv',
  moved: ':mi',
  recent: ':i',
  outcomes: ':o',
  bursts: ':dq',
  burstEnds: ':dx',
  throttles: ':th',
  slotGuard: ':guard',
  waiting: ':wt',
  flows: ':fl',
  flowResultsPrefix: ':fr:',
  parents: ':up',
  notices: ':fo',
  noticesApplied: ':fa',
} as const;

type Named = keyof typeof OWN_KEYS | keyof typeof SHARED_KEYS | 'sharedMeta' | 'sharedGroups';
type KeyFields = Exclude<keyof TypeKeys, 'type' | 'tag' | 'group' | 'queueTag'>;
// Every key of TypeKeys has a suffix here, and every suffix a key: the build fails otherwise.
const sameKeys: [KeyFields, Named] extends [Named, KeyFields] ? true : never = true;
void sameKeys;

/**
 * A queue's keys, named when asked rather than held (since 0.6): RedisLayout
 * keeps one object per queue for good, and its ~50 names held as strings were
 * a third of what an idle handled type cost in memory. The KEYS lists of the
 * scripts' hot calls are built once per queue from them (LuaScripts.keysOf).
 * src/redis/type-keys.ts says what each key holds.
 */
export class QueueKeyNames {
  readonly group: string = 'default';
  readonly queueTag: string;

  constructor(
    readonly type: string,
    readonly tag: string,
    /** `<prefix>:{<tag>}`: every name is this and a suffix. */
    readonly base: string,
  ) {
    this.queueTag = tag;
  }
}

/** A named group's keys: its own under `own`, the rest its queue's (RedisLayout.forGroup). */
export class GroupKeyNames {
  readonly type: string;
  readonly queueTag: string;

  constructor(
    readonly queue: TypeKeys,
    readonly tag: string,
    readonly group: string,
    /** `<prefix>:{<queue tag>}:g:<group>` */
    readonly own: string,
  ) {
    this.type = queue.type;
    this.queueTag = queue.tag;
  }
}

function getters<C>(target: { prototype: C }, names: Readonly<Record<string, string>>, name: (keys: C, suffix: string, key: string) => string): void {
  for (const [key, suffix] of Object.entries(names)) {
    Object.defineProperty(target.prototype, key, {
      get(this: C) {
        return name(this, suffix, key);
      },
      enumerable: true,
    });
  }
}

getters(QueueKeyNames, { ...OWN_KEYS, ...SHARED_KEYS, sharedMeta: OWN_KEYS.meta, sharedGroups: OWN_KEYS.groups }, (keys, suffix) => keys.base + suffix);
getters(GroupKeyNames, OWN_KEYS, (keys, suffix) => keys.own + suffix);
getters(
  GroupKeyNames,
  { ...SHARED_KEYS, sharedMeta: 'meta', sharedGroups: 'groups' },
  (keys, _suffix, key) => keys.queue[(key === 'sharedMeta' ? 'meta' : key === 'sharedGroups' ? 'groups' : key) as keyof TypeKeys],
);

/** The keys of a queue (its default group). */
export function queueKeys(type: string, tag: string, base: string): TypeKeys {
  return new QueueKeyNames(type, tag, base) as unknown as TypeKeys;
}

/** The keys of named group `group` of `queue`. */
export function groupKeys(queue: TypeKeys, tag: string, group: string, own: string): TypeKeys {
  return new GroupKeyNames(queue, tag, group, own) as unknown as TypeKeys;
}
