import { RedisConnectionError, boundErrorText } from '../core/errors';
import { parseEnvelope } from '../core/envelope';
import { MAX_EVENT_VERSION } from '../core/delayed-event.decorator';
import { DEFAULT_PRIORITY_AGING_MS } from '../core/body-extras';
import { CallDeadlines } from './call-deadlines';
import { enqueueArguments, enqueueDurably, policyOf } from './enqueue-call';
import { ScriptPermissions } from './permissions';
import { KeyLists } from './key-lists';
import { READY_WAIT_MS, ReadyGate, isUnsent, typedConnectionError } from './ready-gate';
import type { RedisClient } from './redis-client';
import type { TypeKeys } from './redis-layout';
import { LUA_SOURCES, type LuaArgs, type LuaReplies } from './lua-sources.generated';
import { type LoadedScript, SCRIPT_NAMES, type ScriptName, evalScript, isCluster, loadScript } from './script-calls';
import {
  type ClaimLog,
  type ClaimResult,
  type ClaimedRef,
  type DeadRetention,
  type DispatchResult,
  type Durability,
  type DueSpec,
  type EnqueuePolicy,
  type EnqueueStatus,
  type ScheduledBody,
  claimResultOf,
  KEEP_ALL,
  enqueueStatuses,
  newMarkerValue,
  resultsOf,
} from './script-results';

export type { RedisClient } from './redis-client';
export { loadLua } from './script-calls';
export { newMarkerValue } from './script-results';
export type { ClaimLog, ClaimResult, ClaimedRecord, ClaimedRef, DeadLetterStep, DeadRetention, DispatchResult, Durability, DueSpec, EnqueueStatus, ScheduledBody } from './script-results';

/** Typed calls of the Lua state transitions in lua/; one method per script. */
export class LuaScripts {
  private readonly scripts: Record<ScriptName, LoadedScript>;
  private readonly deadlines: CallDeadlines;
  private readonly permissions: ScriptPermissions;
  /** Per queue, the KEYS of each script's calls on it (src/redis/key-lists.ts). */
  private readonly keyLists: KeyLists;
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
    /** How many handled events each queue keeps, and for how long (0: none / no limit): the keepHandled option. */
    private readonly keepHandled: { readonly count: number; readonly ageMs: number } = { count: 0, ageMs: 0 },
    /** The outcomes option's maxLen: the cap of the outcome streams settled calls append to (0: off; since 0.6). */
    private readonly outcomesMaxLen = 0,
  ) {
    this.deadlines = new CallDeadlines(deadline.ms, deadline.onStuck);
    this.scripts = Object.fromEntries(SCRIPT_NAMES.map((name) => [name, loadScript(name)])) as Record<ScriptName, LoadedScript>;
    this.keyLists = new KeyLists();
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

  /** Any other Redis work of the service under the scripts' deadline (an inspection call, say), started once the connection is ready. */
  bounded<R>(name: string, work: () => Promise<R>): Promise<R> {
    const attempt = () => this.deadlines.bound(work(), name);
    const waiting = this.gate.wait();
    return (waiting ? waiting.then(attempt) : attempt()).then(undefined, (error: unknown) => {
      // Not sent (the connection is being replaced): sending it once it is back is safe.
      const again = isUnsent(error) ? this.gate.next().then(attempt) : Promise.reject(error);
      return again.then(undefined, (failure: unknown) => {
        throw typedConnectionError(failure, name);
      });
    });
  }

  private keysOf(name: ScriptName, keys: TypeKeys, extra?: { readonly claimLog: string }, variant?: string): string[] {
    return this.keyLists.of(this.scripts[name], keys, extra, variant);
  }

  /**
   * Runs script `name` with its arguments by the names its header declares:
   * the generated encoder positions them and the decoder names the reply's
   * fields (scripts/lua-contract.mjs), so a header and its caller agree or
   * the type check fails.
   */
  private run<N extends ScriptName>(name: N, keyArgs: readonly string[], args: LuaArgs[N]): Promise<LuaReplies[N]> {
    // Sent only on a ready connection: a call that gave up waiting was never sent (src/redis/ready-gate.ts).
    const waiting = this.gate.wait();
    if (waiting) return waiting.then(() => this.run(name, keyArgs, args));
    const script = this.scripts[name];
    const contract = LUA_SOURCES[name];
    const argv = contract.encode(args, keyArgs.slice());
    const checking = this.permitted(script, String(argv[0]));
    const call = () => this.deadlines.bound(evalScript(this.client, script, argv, script.numberOfKeys, this.permissions, this.gate), name);
    return (checking ? checking.then(call) : call()).then(
      (reply) => contract.decode(reply),
      (error: unknown) => {
        throw typedConnectionError(error, name);
      },
    );
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
  enqueue(keys: TypeKeys, events: ReadonlyArray<ScheduledBody>, how: EnqueuePolicy | boolean, durability?: Durability): Promise<EnqueueStatus[]> {
    const waiting = this.gate.wait();
    if (waiting) return waiting.then(() => this.enqueue(keys, events, how, durability));
    // The meta key, KEYS[1] of either list: taken from the cached list, not named again on every enqueue.
    const checking = this.permitted(this.scripts.enqueue, this.keysOf('enqueue', keys, undefined, 'plain')[0]!);
    const enqueued = checking ? checking.then(() => this.enqueue(keys, events, how, durability)) : this.enqueueAsArgs(keys, events, policyOf(how), durability);
    return enqueued.then(undefined, (error: unknown) => {
      throw typedConnectionError(error, 'enqueue');
    });
  }

  private async enqueueAsArgs(keys: TypeKeys, events: ReadonlyArray<ScheduledBody>, policy: EnqueuePolicy, durability: Durability | undefined): Promise<EnqueueStatus[]> {
    // A plain enqueue names only the four keys it touches (lua/enqueue.lua says so): fewer arguments to write and read.
    const keyArgs = policy.mode !== '' ? this.keysOf('enqueue', keys) : this.keysOf('enqueue', keys, undefined, 'plain');
    const args = enqueueArguments(keyArgs, policy, this.wakeChannel, keys.tag, events);
    const sent = durability
      ? enqueueDurably(this.client, this.scripts.enqueue, args, keyArgs.length, durability, this.deadlines)
      : this.deadlines.bound(evalScript(this.client, this.scripts.enqueue, args, keyArgs.length, this.permissions, this.gate), 'enqueue');
    return enqueueStatuses(LUA_SOURCES.enqueue.decode(await sent));
  }

  /**
   * Moves due events and expired leases to the ready lists. `defaultGroupHere`:
   * a handler of the default group runs in this instance (it registers the
   * group once the type has named ones). With `registrations`
   * (an instance with named groups on the queue), reads the queue's marker
   * and, while it is missing, registers those groups again before anything
   * moves (lua/dispatch-due.lua).
   */
  async dispatchDue(
    keys: TypeKeys,
    limit: number,
    defaultGroupHere = false,
    registrations?: { readonly newMarker: string; readonly markerSeenBefore: boolean; readonly groups: readonly string[] },
    keepDead: DeadRetention = KEEP_ALL,
  ): Promise<DispatchResult> {
    // The history (keepHandled) loses what is past its age here, as time passes (lua/dispatch-due.lua).
    const keepAgeMs = this.keepHandled.ageMs > 0 && this.keepHandled.count > 0 ? this.keepHandled.ageMs : 0;
    const reply = await this.run('dispatch-due', this.keysOf('dispatch-due', keys), {
      limit,
      defaultHere: defaultGroupHere,
      newMarker: registrations?.newMarker ?? '',
      wakeChannel: this.wakeChannel,
      queueTag: keys.queueTag,
      markerSeen: registrations?.markerSeenBefore ?? false,
      keepAgeMs,
      keepDeadCount: keepDead.count,
      keepDeadAge: keepDead.ageMs,
      groups: registrations?.groups ?? [],
    });
    return reply;
  }

  /**
   * Completes the succeeded events (fenced by their claims), then claims up to `count` ready events; one
   * round trip for both. What the claim took is kept under `claim.log` with `claim.token` (none when the
   * token is empty), so that if the reply is lost the reader can give it back (releaseClaim).
   */
  async completeAndClaim(
    keys: TypeKeys,
    succeeded: ReadonlyArray<ClaimedRef>,
    count: number,
    leaseMs: number,
    maxAttempts: number,
    claim: ClaimLog = { log: `${keys.claimLogPrefix}-`, token: '' },
    options: {
      readonly startNow?: number;
      readonly started?: ReadonlyArray<ClaimedRef>;
      readonly confirm?: ReadonlyArray<ClaimedRef>;
      readonly maxVersion?: number;
      readonly sortsByKey?: boolean;
      readonly agingMs?: number; // priorityAgingMs (0: never)
      readonly heartbeatLeaseMs?: number; // the heartbeat lease (0: none)
    } = {},
  ): Promise<ClaimResult> {
    const reply = await this.run('complete-and-claim', this.keysOf('complete-and-claim', keys, { claimLog: claim.log }), {
      most: count,
      leaseMs,
      maxAttempts,
      windowMs: this.idempotencyWindowMs,
      token: claim.token,
      startNow: options.startNow ?? count,
      keepCount: this.keepHandled.count,
      keepAge: this.keepHandled.ageMs,
      maxVersion: options.maxVersion ?? MAX_EVENT_VERSION,
      sortsByKey: options.sortsByKey ?? false,
      agingMs: options.agingMs ?? DEFAULT_PRIORITY_AGING_MS,
      heartbeatLeaseMs: options.heartbeatLeaseMs ?? 0,
      outcomesMaxLen: this.outcomesMaxLen,
      started: options.started ?? [],
      confirmations: options.confirm ?? [],
      successes: succeeded,
      results: resultsOf(succeeded),
    });
    return claimResultOf(reply, options.startNow ?? count);
  }

  /** Returns the new due time, or undefined when the claim was stale. The error is stored cut to MAX_ERROR_BYTES. */
  async retry(keys: TypeKeys, event: ClaimedRef & { readonly attempt: number }, backoffMs: number, error: string): Promise<number | undefined> {
    const due = await this.run('retry', this.keysOf('retry', keys), {
      id: event.id,
      claim: event.claim,
      attempt: event.attempt,
      backoffMs,
      errorText: boundErrorText(error),
      outcomesMaxLen: this.outcomesMaxLen,
    });
    return due < 0 ? undefined : due;
  }

  /**
   * A snooze (lua/snooze.lua): back to SCHEDULED after `delayMs`, the attempt
   * unspent, `body` stored (its snooze count one more, maybe a new payload).
   * The new due time; 'stale' when the claim was; 'refused' when a new
   * payload was, the type having more than one group.
   */
  async snooze(keys: TypeKeys, event: ClaimedRef & { readonly attempt: number }, delayMs: number, body: string, replaces: boolean): Promise<number | 'stale' | 'refused'> {
    const due = await this.run('snooze', this.keysOf('snooze', keys), { id: event.id, claim: event.claim, attempt: event.attempt, delayMs, body, replaces, outcomesMaxLen: this.outcomesMaxLen });
    return due === -1 ? 'stale' : due === -2 ? 'refused' : due;
  }

  /** True when dead-lettered, false when the claim was stale. The reason is stored cut to MAX_ERROR_BYTES. */
  async deadLetter(keys: TypeKeys, event: ClaimedRef & { readonly attempt: number }, reason: string, keep: DeadRetention = KEEP_ALL): Promise<boolean> {
    const args = { id: event.id, claim: event.claim, attempt: event.attempt, reason: boundErrorText(reason), keepCount: keep.count, keepAge: keep.ageMs, outcomesMaxLen: this.outcomesMaxLen };
    return (await this.run('dead-letter', this.keysOf('dead-letter', keys), args)) >= 1;
  }

  /** Removes an event in any state; `mark: false` leaves no idempotency mark (an occurrence its schedule will enqueue again). */
  async cancel(keys: TypeKeys, id: string, mark = true): Promise<boolean> {
    const windowMs = mark ? this.idempotencyWindowMs : 0;
    return (await this.run('cancel', this.keysOf('cancel', keys), { id, windowMs, outcomesMaxLen: this.outcomesMaxLen })) >= 1;
  }

  /** Registers subscriber group `group` of a queue (a type or one partition); true when it is new. Not `fresh` (restored after a loss): refused on an obliterated queue. */
  async registerGroup(keys: TypeKeys, group: string, signal?: AbortSignal, fresh = true): Promise<boolean> {
    // With its text, not its SHA: addHandler does not wait for the registration, and an enqueue
    // sent right after must not run first, as it would while a NOSCRIPT reply came back and the
    // script was sent again; events falling due meanwhile would miss the group.
    const script = this.scripts['register-group'];
    await this.gate.wait();
    // The wait for a connection may outlast the service: a registration is not sent after close().
    if (signal?.aborted) return false;
    const args = LUA_SOURCES['register-group'].encode({ group, marker: newMarkerValue(), fresh });
    const registered = this.deadlines.bound(this.client.eval(script.lua, script.numberOfKeys, ...this.keysOf('register-group', keys), ...args), 'register-group');
    const reply = await registered.then(undefined, (error: unknown) => {
      throw typedConnectionError(error, 'register-group');
    });
    return LUA_SOURCES['register-group'].decode(reply) === 1;
  }

  /** Unregisters a named group and drops up to `limit` of the events it holds; says whether it was registered and how many are left. */
  async removeGroup(keys: TypeKeys, group: string, limit: number): Promise<{ existed: boolean; left: number }> {
    return this.run('remove-group', this.keysOf('remove-group', keys), { group, most: limit });
  }

  /**
   * Moves a scheduled or ready event to a new due time (`+<ms>` from Redis's
   * now, or absolute ms), keeping its payload, context and attempts. Resolves
   * the new due time, or undefined when the event is not stored, in flight or dead.
   */
  async reschedule(keys: TypeKeys, id: string, due: DueSpec): Promise<number | undefined> {
    const spec = 'delayMs' in due ? `+${Math.max(0, Math.round(due.delayMs))}` : String(Math.round(due.atMs));
    const newDue = await this.run('reschedule', this.keysOf('reschedule', keys), { wakeChannel: this.wakeChannel, wakeTag: keys.tag, id, dueSpec: spec });
    return newDue < 0 ? undefined : newDue;
  }

  /** Stores a recurring schedule's next definition if it is still `read`; false when another instance changed it first. */
  async advanceSchedule(keys: TypeKeys, name: string, read: string, next: string): Promise<boolean> {
    return (await this.run('advance-schedule', this.keysOf('advance-schedule', keys), { name, read, toStore: next })) === 1;
  }

  /** Gives back events claimed ahead and never started, each fenced by the claim that took it; resolves how many went back to READY. */
  async releaseUnstarted(keys: TypeKeys, events: ReadonlyArray<ClaimedRef>): Promise<number> {
    return this.run('release-unstarted', this.keysOf('release-unstarted', keys), { events });
  }

  /** Gives a running event back to READY without spending its attempt, and holds the queue for `holdMs`; true when given back. */
  async rateLimited(keys: TypeKeys, event: ClaimedRef, holdMs: number): Promise<{ givenBack: boolean; heldForMs: number }> {
    const reply = await this.run('rate-limited', this.keysOf('rate-limited', keys), { id: event.id, claim: event.claim, holdMs: Math.ceil(holdMs), outcomesMaxLen: this.outcomesMaxLen });
    return { givenBack: reply.givenBack, heldForMs: Number(reply.heldMs) };
  }

  /** The ids at the head of the ready list and their bodies ('' when gone), for a reader that sorts them by key. */
  async peekReady(keys: TypeKeys, most: number): Promise<Array<{ id: string; body: string }>> {
    const flat = await this.run('peek-ready', this.keysOf('peek-ready', keys), { most });
    const out: Array<{ id: string; body: string }> = [];
    for (let i = 0; i < flat.length; i += 2) out.push({ id: flat[i]!, body: flat[i + 1] ? parseEnvelope(flat[i + 1]!).body : '' });
    return out;
  }

  /** Moves ready ids to their keys' lists (those still in the ready list); resolves how many. */
  async classify(keys: TypeKeys, sorted: ReadonlyArray<{ readonly id: string; readonly key: string }>): Promise<number> {
    if (sorted.length === 0) return 0;
    return this.run('classify', this.keysOf('classify', keys), { sorted });
  }

  /** Wakes the instances if a claim found the queue's concurrency limit full; true when one had. */
  async wakeWaiters(keys: TypeKeys): Promise<boolean> {
    return (await this.run('wake-waiters', this.keysOf('wake-waiters', keys), { wakeChannel: this.wakeChannel, wakeMessage: `${keys.queueTag}|-1` })) === 1;
  }

  /** Takes the events of `ids` no holder has in flight out of their queue, into its moving hash; resolves their records. */
  async migrateOut(keys: TypeKeys, token: string, ids: readonly string[]): Promise<Array<{ id: string; record: string }>> {
    if (ids.length === 0) return [];
    const flat = await this.run('migrate-out', this.keysOf('migrate-out', keys), { token, ids });
    const out: Array<{ id: string; record: string }> = [];
    for (let i = 0; i < flat.length; i += 2) out.push({ id: flat[i]!, record: flat[i + 1]! });
    return out;
  }

  /** Stores moved records in their new queue, once per token; resolves how many were stored (0 when the token was stored before). */
  async migrateIn(keys: TypeKeys, token: string, records: readonly string[]): Promise<number> {
    if (records.length === 0) return 0;
    return this.run('migrate-in', this.keysOf('migrate-in', keys), { token, wakeChannel: this.wakeChannel, wakeTag: keys.tag, records });
  }

  /** Drops the moving records of the move `token` (not a newer move of the same id); resolves how many. */
  async migrateDone(keys: TypeKeys, token: string, ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    return this.run('migrate-done', this.keysOf('migrate-done', keys), { token, ids });
  }

  /** Gives back the events of the claim `token` whose reply was lost; resolves how many went back to READY. */
  async releaseClaim(keys: TypeKeys, claim: ClaimLog): Promise<number> {
    return this.run('release-claim', this.keysOf('release-claim', keys, { claimLog: claim.log }), { token: claim.token });
  }

  /**
   * Runs script `name` on a queue, its arguments by the names its header
   * declares: for the calls made beside their callers (src/redis/housekeeping.ts).
   */
  call<N extends ScriptName>(name: N, keys: TypeKeys, args: LuaArgs[N]): Promise<LuaReplies[N]> {
    return this.run(name, this.keysOf(name, keys), args);
  }
}
