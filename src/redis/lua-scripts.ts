import { createHash, randomBytes } from 'node:crypto';
import type { Cluster } from 'ioredis';
import type { RedisClient } from './redis-client';
import { CallDeadlines } from './call-deadlines';
import { parseEnvelope } from '../core/envelope';
import { NotReplicatedError, RedisConnectionError } from '../core/errors';
import type { TypeKeys } from './redis-layout';
import { LUA_SOURCES } from './lua-sources.generated';
import { ScriptPermissions, isPermissionError, permissionError } from './permissions';
import { READY_WAIT_MS, ReadyGate, isUnsent, nextReady } from './ready-gate';

export type { RedisClient } from './redis-client';

const SCRIPT_NAMES = [
  'enqueue',
  'dispatch-due',
  'complete-and-claim',
  'retry',
  'dead-letter',
  'cancel',
  'replay-dead',
  'purge-dead',
  'release-claim',
  'release-unstarted',
  'register-group',
  'remove-group',
  'reschedule',
  'advance-schedule',
] as const;
type ScriptName = (typeof SCRIPT_NAMES)[number];

interface LoadedScript {
  readonly name: ScriptName;
  readonly lua: string;
  readonly sha: string;
  readonly numberOfKeys: number;
  /** Its keys by name, in order, from its header; and the shorter sets it also takes. */
  readonly keys: readonly string[];
  readonly variants: Readonly<Record<string, readonly string[]>>;
  /** What an ACL user needs to run it. */
  readonly commands: readonly string[];
}

/**
 * A script of lua/, its `-- @include name` lines inlined from lua/includes, and
 * the number of keys its header declares (its `-- KEYS[n]` lines). The scripts
 * are compiled in (src/redis/lua-sources.generated.ts, written from lua/ by
 * `npm run embed-lua`): nothing is read from disk, so bundles work too.
 */
export function loadLua(name: string): { lua: string; numberOfKeys: number; keys: readonly string[]; variants: Readonly<Record<string, readonly string[]>>; commands: readonly string[] } {
  const script = Object.hasOwn(LUA_SOURCES, name) ? LUA_SOURCES[name as keyof typeof LUA_SOURCES] : undefined;
  if (!script) throw new Error(`reactive-delayed-events: no Lua script '${name}' (lua/${name}.lua); after adding one, run npm run embed-lua`);
  return { lua: script.lua, numberOfKeys: script.keys.length, keys: script.keys, variants: script.variants, commands: script.commands };
}

function loadScript(name: ScriptName): LoadedScript {
  const { lua, numberOfKeys, keys, variants, commands } = loadLua(name);
  return { name, lua, numberOfKeys, keys, variants, commands, sha: createHash('sha1').update(lua).digest('hex') };
}

/** NOSCRIPT: Redis does not hold the script (it restarted, or a replica that never ran it took over). */
function isMissingScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * EVALSHA, and EVAL (which caches the script again) only when Redis answers
 * NOSCRIPT: a call that got NOSCRIPT ran nothing, so sending it again is safe.
 * ioredis's defineCommand does the same but cost ~4 µs more a call, a few
 * percent of an event at parallelism 1 (measured with the benchmarks).
 */
function evalScript(
  client: RedisClient,
  script: LoadedScript,
  args: ReadonlyArray<string | number>,
  numberOfKeys = script.numberOfKeys,
  permissions?: ScriptPermissions,
  gate?: ReadyGate,
  unsentRetries = 1,
): Promise<unknown> {
  return client.evalsha(script.sha, numberOfKeys, ...args).then(undefined, (error: unknown) => {
    if (isPermissionError(error)) throw refused(script, error, permissions);
    // Not sent (the connection is being replaced): sending it once it is back is safe.
    if (isUnsent(error) && unsentRetries > 0) {
      return (gate ? gate.next() : nextReady(client)).then(() => evalScript(client, script, args, numberOfKeys, permissions, gate, unsentRetries - 1));
    }
    if (!isMissingScript(error)) throw error;
    return client.eval(script.lua, numberOfKeys, ...args).then(undefined, (again: unknown) => {
      throw isPermissionError(again) ? refused(script, again, permissions) : again;
    });
  });
}

/** A NOPERM, which the permission check should have prevented (an ACL narrowed since): every answer is asked again. */
function refused(script: LoadedScript, error: unknown, permissions: ScriptPermissions | undefined): Error {
  permissions?.forget();
  const typed = permissionError(`a command of the ${script.name} script`, error);
  permissions?.refused(typed);
  return typed;
}

function enqueueStatus(status: number): EnqueueStatus {
  return status === 0 ? 'duplicate' : status === 2 ? 'replaced' : 'scheduled';
}

/** The enqueue script's reply: one status per event, or one event's status alone. */
function enqueueStatuses(reply: unknown): EnqueueStatus[] {
  return typeof reply === 'number' ? [enqueueStatus(reply)] : (reply as number[]).map(enqueueStatus);
}

/** By its flag, not instanceof: a Cluster of ioredis 5 is no instance of ioredis 6's class. */
function isCluster(client: RedisClient): client is Cluster {
  return client.isCluster;
}

/** A cluster's answer that the slot is elsewhere or moving: the command ran nowhere. */
function isRedirection(error: unknown): error is Error {
  return error instanceof Error && /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(error.message);
}

/**
 * After MOVED, waits for a fresh slot map, so the next call goes to the slot's
 * new master; after ASK, TRYAGAIN or CLUSTERDOWN (a slot moving, a failover under
 * way), waits as ioredis itself would before trying again.
 */
function followRedirection(cluster: Cluster, error: Error): Promise<void> {
  if (error.message.startsWith('MOVED ')) return new Promise((resolve) => cluster.refreshSlotsCache(() => resolve()));
  const delay = error.message.startsWith('CLUSTERDOWN ') ? cluster.options.retryDelayOnClusterDown : cluster.options.retryDelayOnTryAgain;
  return new Promise((resolve) => setTimeout(resolve, delay ?? 100));
}

export interface ClaimedRecord {
  readonly id: string;
  /**
   * The claim that took it (its lease's not-started score, lua/includes/lease-constants.lua):
   * every result names it, and applies only while the lease is still this claim's.
   */
  readonly claim: number;
  /** Whether its lease was written started: it was claimed for a free slot. */
  readonly started: boolean;
  readonly attempt: number;
  readonly dueAt: number;
  readonly body: string;
}

export interface ClaimResult {
  readonly now: number;
  /** Positions (from 0) of the succeeded events passed in that were stale (fenced off); the others completed. */
  readonly stale: readonly number[];
  readonly claimed: ClaimedRecord[];
  readonly deadLettered: Array<{ id: string; attempt: number }>;
  /** The type is paused: nothing was claimed. */
  readonly paused: boolean;
}

export interface DispatchResult {
  readonly movedDue: number;
  readonly movedExpired: number;
  /** Next due time or lease expiry, Redis clock; -1 when nothing waits. */
  readonly nextDue: number;
  readonly now: number;
  /** The queue's marker value (asked with `newMarker`): a value other than the one seen before says Redis lost its registrations. */
  readonly marker: string;
}

export type EnqueueStatus = 'scheduled' | 'duplicate' | 'replaced';

/** An event as one claim took it: what a result names to be fenced by that claim. */
export interface ClaimedRef {
  readonly id: string;
  readonly claim: number;
}

/** A value for a queue's marker: unique, so that a marker set anew differs from every one seen before. */
export function newMarkerValue(): string {
  return randomBytes(8).toString('hex');
}

/** Where a reader's claims are logged (a key in its queue's slot), and the token of the claim being made. */
export interface ClaimLog {
  readonly log: string;
  readonly token: string;
}

/** Replicas that must confirm an enqueue (Redis WAIT) before it counts as done. */
export interface Durability {
  readonly replicas: number;
  readonly timeoutMs: number;
}

/** When an event is due: relative to Redis's clock, or absolute. */
export type DueSpec = { readonly delayMs: number } | { readonly atMs: number };

export interface ScheduledBody {
  readonly id: string;
  readonly body: string;
  readonly due: DueSpec;
  /**
   * performance.now() when the store was asked for: a delay counts from then,
   * not from when Redis runs the script, so time spent in this process before
   * the call leaves (a batch gathering, a stalled event loop) does not make the
   * event late.
   */
  requestedAt: number;
}

/** One call on a type's dead letters: how many it acted on, and how many it took from the dead-letter set. */
export interface DeadLetterStep {
  readonly done: number;
  readonly taken: number;
}

/** Typed calls of the Lua state transitions in lua/; one method per script. */
export class LuaScripts {
  private readonly scripts: Record<ScriptName, LoadedScript>;
  private readonly deadlines: CallDeadlines;
  private readonly permissions: ScriptPermissions;
  /** Per queue, the KEYS of each script's calls on it (keysOf()). */
  private readonly keyLists = new WeakMap<TypeKeys, Map<string, string[]>>();
  /** Holds calls until the connection is ready (src/redis/ready-gate.ts). */
  readonly gate: ReadyGate;

  /**
   * `deadline` bounds every call: a call that outlives it (a frozen Redis, a
   * half-open socket) fails like an outage, and `onStuck` may reset the connection.
   * `idempotencyWindowMs`: how long an id handled or cancelled stays marked, so
   * that enqueueing it again is a duplicate.
   */
  constructor(
    private readonly client: RedisClient,
    private readonly wakeChannel: string,
    deadline: { readonly ms: number; readonly onStuck: () => void },
    private readonly idempotencyWindowMs: number,
    /** How long a call waits for a connection that is not ready before it fails, unsent. */
    readyWaitMs = Math.min(READY_WAIT_MS, deadline.ms),
    /** Told of each refusal by the user's ACL (src/redis/permissions.ts). */
    onRefused?: (error: RedisConnectionError) => void,
  ) {
    this.deadlines = new CallDeadlines(deadline.ms, deadline.onStuck);
    this.scripts = Object.fromEntries(SCRIPT_NAMES.map((name) => [name, loadScript(name)])) as Record<ScriptName, LoadedScript>;
    this.permissions = new ScriptPermissions(client, wakeChannel, onRefused);
    // The permission answers are asked again after a reconnect (the user may have changed).
    this.gate = new ReadyGate(client, readyWaitMs, () => this.permissions.forget());
    // A connection that never sends a command again (autoResendUnfulfilledCommands: false) drops the
    // calls it had sent when it closes: ioredis never settles them, and they would hang until their
    // deadline. They fail at once instead, like the outage they are. Calls made while it was not
    // ready wait in ioredis's offline queue and are sent on reconnect, so they are left alone.
    // A Cluster re-routes its own.
    if (!isCluster(client) && client.options.autoResendUnfulfilledCommands === false) {
      let ready = client.status === 'ready';
      client.on('ready', () => (ready = true));
      client.on('close', () => {
        if (!ready) return;
        ready = false;
        this.deadlines.failAll((name) => new RedisConnectionError('other', `the connection closed before Redis answered ${name}; it may have run (enqueueing an event again is safe)`));
      });
    }
  }

  /** The ACL refusal that holds now, if any (src/redis/permissions.ts). */
  get refusal(): RedisConnectionError | undefined {
    return this.permissions.refusal;
  }

  /**
   * Any other Redis work of the service under the same deadline as the
   * scripts (an inspection call, say), started once the connection is ready.
   */
  bounded<R>(name: string, work: () => Promise<R>): Promise<R> {
    const waiting = this.gate.wait();
    if (waiting) return waiting.then(() => this.deadlines.bound(work(), name));
    return this.deadlines.bound(work(), name);
  }

  /**
   * The KEYS of a call of `name` on a queue, in the order its header declares
   * them (`-- KEYS[n] <name>:`, scripts/embed-lua.mjs), or of its `variant`.
   * Built once per queue and script: the same TypeKeys object comes back for a
   * queue (src/redis/redis-layout.ts), so the hot calls build nothing. Keys
   * that are no TypeKeys field (claimLog) are given by the caller.
   */
  private keysOf(name: ScriptName, keys: TypeKeys, extra?: { readonly claimLog: string }, variant?: string): string[] {
    const script = this.scripts[name];
    const names = variant === undefined ? script.keys : script.variants[variant];
    if (!names) throw new Error(`lua/${name}.lua declares no KEYS(${variant})`);
    const cacheKey = variant === undefined ? name : `${name}(${variant})`;
    let perQueue = extra ? undefined : this.keyLists.get(keys);
    const cached = perQueue?.get(cacheKey);
    if (cached) return cached;
    const fields = keys as unknown as Record<string, unknown>;
    const list = names.map((key) => {
      const value = key === 'claimLog' ? extra?.claimLog : fields[key];
      if (typeof value !== 'string') throw new Error(`lua/${name}.lua declares key '${key}', which is no field of TypeKeys (src/redis/redis-layout.ts)`);
      return value;
    });
    if (!extra) {
      if (!perQueue) this.keyLists.set(keys, (perQueue = new Map()));
      perQueue.set(cacheKey, list);
    }
    return list;
  }

  private run(name: ScriptName, keyArgs: readonly string[], ...argv: Array<string | number>): Promise<unknown> {
    // Sent only on a ready connection: a call that gave up waiting was never sent (src/redis/ready-gate.ts).
    const waiting = this.gate.wait();
    if (waiting) return waiting.then(() => this.run(name, keyArgs, ...argv));
    const script = this.scripts[name];
    const args = [...keyArgs, ...argv];
    const checking = this.permitted(script, String(args[0]));
    if (checking) return checking.then(() => this.deadlines.bound(evalScript(this.client, script, args, script.numberOfKeys, this.permissions, this.gate), name));
    return this.deadlines.bound(evalScript(this.client, script, args, script.numberOfKeys, this.permissions, this.gate), name);
  }

  /** Undefined when the user may run `script` on the queue of `key` (known already); else the check under way (src/redis/permissions.ts). */
  private permitted(script: LoadedScript, key: string): Promise<void> | undefined {
    const checking = this.permissions.ensure(script.name, key, script.commands);
    return checking && this.deadlines.bound(checking, `${script.name} (permission check)`);
  }

  /**
   * Stores events of one type in one call; one status per event, in order.
   * With `durability`, a WAIT follows in the same pipeline (so on a cluster it
   * reaches the node that took the write) and too few replicas is an error.
   */
  enqueue(keys: TypeKeys, events: ReadonlyArray<ScheduledBody>, replace: boolean, durability?: Durability): Promise<EnqueueStatus[]> {
    const waiting = this.gate.wait();
    if (waiting) return waiting.then(() => this.enqueue(keys, events, replace, durability));
    const checking = this.permitted(this.scripts.enqueue, keys.meta);
    if (checking) return checking.then(() => this.enqueue(keys, events, replace, durability));
    return this.enqueueAsArgs(keys, events, replace, durability);
  }

  private async enqueueAsArgs(keys: TypeKeys, events: ReadonlyArray<ScheduledBody>, replace: boolean, durability: Durability | undefined): Promise<EnqueueStatus[]> {
    // A plain enqueue names only the four keys it touches (lua/enqueue.lua says so): fewer arguments to write and read.
    const keyArgs = replace ? this.keysOf('enqueue', keys) : this.keysOf('enqueue', keys, undefined, 'plain');
    const args: Array<string | number> = [...keyArgs, replace ? '1' : '0', this.wakeChannel, keys.tag];
    const numberOfKeys = keyArgs.length;
    // Events of one call mostly share a delay: its argument is built once.
    let lastDelay = -1;
    let delayArg = '';
    const sentAt = performance.now();
    for (const e of events) {
      if ('delayMs' in e.due) {
        const delay = Math.max(0, Math.round(e.due.delayMs - (sentAt - e.requestedAt)));
        if (delay !== lastDelay) {
          lastDelay = delay;
          delayArg = `+${delay}`;
        }
        args.push(e.id, e.body, delayArg);
      } else {
        args.push(e.id, e.body, e.due.atMs);
      }
    }
    let statuses: number | number[];
    if (!durability) {
      statuses = (await this.deadlines.bound(evalScript(this.client, this.scripts.enqueue, args, numberOfKeys, this.permissions, this.gate), 'enqueue')) as number | number[];
    } else {
      const enqueue = this.scripts.enqueue;
      const storeAndWait = (loaded: boolean) => {
        const pipeline = this.client.pipeline();
        if (loaded) pipeline.evalsha(enqueue.sha, numberOfKeys, ...args);
        else pipeline.eval(enqueue.lua, numberOfKeys, ...args);
        pipeline.wait(durability.replicas, durability.timeoutMs);
        return this.deadlines.bound(pipeline.exec(), 'enqueue+wait', this.deadlines.defaultMs + durability.timeoutMs);
      };
      let [stored, waited] = (await storeAndWait(true)) ?? [];
      // A script Redis did not hold stored nothing: sending it whole again is safe.
      if (stored && isMissingScript(stored[0])) [stored, waited] = (await storeAndWait(false)) ?? [];
      // ioredis follows a redirection for a pipeline only when every command got
      // it; WAIT, which names no key, does not. A redirected script ran nowhere,
      // so it is sent again once the slot map says where its slot lives now.
      for (let redirections = 0; stored && isRedirection(stored[0]) && isCluster(this.client); redirections++) {
        if (redirections >= (this.client.options.maxRedirections ?? 16)) throw stored[0];
        await followRedirection(this.client, stored[0]);
        [stored, waited] = (await storeAndWait(true)) ?? [];
        if (stored && isMissingScript(stored[0])) [stored, waited] = (await storeAndWait(false)) ?? [];
      }
      if (!stored || stored[0]) throw stored?.[0] ?? new Error('enqueue got no reply');
      if (!waited || waited[0]) throw waited?.[0] ?? new Error('WAIT got no reply');
      statuses = stored[1] as number | number[];
      const acknowledged = Number(waited[1]);
      if (acknowledged < durability.replicas) throw new NotReplicatedError(acknowledged, durability.replicas, durability.timeoutMs);
    }
    return enqueueStatuses(statuses);
  }

  /** `defaultGroupHere`: a handler of the default group runs in this instance (it registers the group once the type has named ones). */
  async dispatchDue(keys: TypeKeys, limit: number, defaultGroupHere = false, newMarker = ''): Promise<DispatchResult> {
    const [movedDue, movedExpired, nextDue, now, marker] = (await this.run(
      'dispatch-due',
      this.keysOf('dispatch-due', keys),
      limit,
      defaultGroupHere ? '1' : '0',
      newMarker,
      this.wakeChannel,
      keys.queueTag,
    )) as [number, number, number, number, string];
    return { movedDue: movedDue ?? 0, movedExpired: movedExpired ?? 0, nextDue: nextDue ?? -1, now: now ?? Date.now(), marker: String(marker ?? '') };
  }

  /**
   * Completes the succeeded events (fenced by attempt), then claims up to
   * `count` ready events; one round trip for both. What the claim took is kept
   * under `claim.log` with `claim.token` (none when the token is empty), so
   * that if the reply is lost the reader can give it back (releaseClaim).
   */
  async completeAndClaim(
    keys: TypeKeys,
    succeeded: ReadonlyArray<ClaimedRef>,
    count: number,
    leaseMs: number,
    maxAttempts: number,
    claim: ClaimLog = { log: `${keys.claimLogPrefix}-`, token: '' },
    options: { readonly startNow?: number; readonly started?: ReadonlyArray<ClaimedRef> } = {},
  ): Promise<ClaimResult> {
    const started = options.started ?? [];
    const args: Array<string | number> = [count, leaseMs, maxAttempts, this.idempotencyWindowMs, claim.token, options.startNow ?? count, started.length];
    for (const s of started) args.push(s.id, s.claim);
    for (const s of succeeded) args.push(s.id, s.claim);
    const [now, stalePositions, flat, dead, paused, claimScore] = (await this.run('complete-and-claim', this.keysOf('complete-and-claim', keys, { claimLog: claim.log }), ...args)) as [
      number,
      number[],
      string[],
      string[],
      number,
      string,
    ];
    const claimed: ClaimedRecord[] = [];
    const identity = Number(claimScore);
    const startNow = options.startNow ?? count;
    for (let i = 0; i < flat.length; i += 2) {
      const envelope = parseEnvelope(flat[i + 1]!);
      // The envelope keeps the attempt before the claim; the claim's is the next.
      claimed.push({ id: flat[i]!, claim: identity, started: i < 2 * startNow, attempt: envelope.attempt + 1, dueAt: envelope.dueAt, body: envelope.body });
    }
    const deadLettered: Array<{ id: string; attempt: number }> = [];
    for (let i = 0; i < dead.length; i += 2) deadLettered.push({ id: dead[i]!, attempt: Number(dead[i + 1]) });
    return { now, stale: stalePositions.map((position) => position - 1), claimed, deadLettered, paused: paused === 1 };
  }

  /** Returns the new due time, or undefined when the claim was stale. */
  async retry(keys: TypeKeys, event: ClaimedRef & { readonly attempt: number }, backoffMs: number, error: string): Promise<number | undefined> {
    const due = (await this.run('retry', this.keysOf('retry', keys), event.id, event.claim, event.attempt, backoffMs, error)) as number;
    return due < 0 ? undefined : due;
  }

  /** True when dead-lettered, false when the claim was stale. */
  async deadLetter(keys: TypeKeys, event: ClaimedRef & { readonly attempt: number }, reason: string): Promise<boolean> {
    return (await this.run('dead-letter', this.keysOf('dead-letter', keys), event.id, event.claim, event.attempt, reason)) === 1;
  }

  /** Removes an event in any state; `mark: false` leaves no idempotency mark (an occurrence its schedule will enqueue again). */
  async cancel(keys: TypeKeys, id: string, mark = true): Promise<boolean> {
    const window = mark ? this.idempotencyWindowMs : 0;
    return (await this.run('cancel', this.keysOf('cancel', keys), id, window)) === 1;
  }

  /** Registers subscriber group `group` of a queue (a type or one partition); true when it is new. */
  async registerGroup(keys: TypeKeys, group: string): Promise<boolean> {
    // With its text, not its SHA: addHandler does not wait for the registration, and an enqueue
    // sent right after must not run first, as it would while a NOSCRIPT reply came back and the
    // script was sent again; events falling due meanwhile would miss the group.
    const script = this.scripts['register-group'];
    await this.gate.wait();
    return (await this.deadlines.bound(this.client.eval(script.lua, script.numberOfKeys, ...this.keysOf('register-group', keys), group, newMarkerValue()), 'register-group')) === 1;
  }

  /** Unregisters a named group and drops up to `limit` of the events it holds; says whether it was registered and how many are left. */
  async removeGroup(keys: TypeKeys, group: string, limit: number): Promise<{ existed: boolean; left: number }> {
    const [existed, left] = (await this.run('remove-group', this.keysOf('remove-group', keys), group, limit)) as [number, number];
    return { existed: existed === 1, left };
  }

  /**
   * Moves a scheduled or ready event to a new due time (`+<ms>` from Redis's
   * now, or absolute ms), keeping its payload, context and attempts. Resolves
   * the new due time, or undefined when the event is not stored, in flight or dead.
   */
  async reschedule(keys: TypeKeys, id: string, due: DueSpec): Promise<number | undefined> {
    const spec = 'delayMs' in due ? `+${Math.max(0, Math.round(due.delayMs))}` : String(Math.round(due.atMs));
    const newDue = (await this.run('reschedule', this.keysOf('reschedule', keys), this.wakeChannel, keys.tag, id, spec)) as number;
    return newDue < 0 ? undefined : newDue;
  }

  /** Stores a recurring schedule's next definition if it is still `read`; false when another instance changed it first. */
  async advanceSchedule(keys: TypeKeys, name: string, read: string, next: string): Promise<boolean> {
    return (await this.run('advance-schedule', this.keysOf('advance-schedule', keys), name, read, next)) === 1;
  }

  /**
   * Gives back events claimed ahead and never started, each fenced by the
   * claim that took it; resolves how many went back to READY.
   */
  async releaseUnstarted(keys: TypeKeys, events: ReadonlyArray<ClaimedRef>): Promise<number> {
    const args: Array<string | number> = [];
    for (const e of events) args.push(e.id, e.claim);
    return (await this.run('release-unstarted', this.keysOf('release-unstarted', keys), ...args)) as number;
  }

  /** Gives back the events of the claim `token` whose reply was lost; resolves how many went back to READY. */
  async releaseClaim(keys: TypeKeys, claim: ClaimLog): Promise<number> {
    return (await this.run('release-claim', this.keysOf('release-claim', keys, { claimLog: claim.log }), claim.token)) as number;
  }

  /** How many were replayed, and how many dead letters were taken (those without an envelope are dropped). */
  async replayDead(keys: TypeKeys, ids: readonly string[], limit: number): Promise<DeadLetterStep> {
    const [done, taken] = (await this.run('replay-dead', this.keysOf('replay-dead', keys), this.wakeChannel, keys.tag, limit, ...ids)) as [number, number];
    return { done, taken };
  }

  async purgeDead(keys: TypeKeys, ids: readonly string[], limit: number): Promise<DeadLetterStep> {
    const purged = (await this.run('purge-dead', this.keysOf('purge-dead', keys), limit, ...ids)) as number;
    return { done: purged, taken: purged };
  }
}
