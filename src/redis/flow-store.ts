import type { LuaScripts } from './lua-scripts';
import type { RedisClient } from './redis-client';
import type { RedisLayout, TypeKeys } from './redis-layout';
import type { DueSpec } from './script-results';

// A flow's records in Redis (since 0.6; docs/flows.md, docs/state-machine.md,
// "Flows"): a parent WAITING in its own slot, each child linked to it in the
// child's slot, and the notices by which a settled child reaches its parent
// across slots. Each step is one script in one slot, and each is idempotent:
// a notice carries its child's number for it, so sent twice (a crash before
// its outbox entry went, a sweep beside the sender) it is counted once.

/** What a parent does when the child of an edge is dead-lettered or cancelled. */
export type ChildFailurePolicy = 'fail' | 'ignore' | 'continue';
export const CHILD_FAILURE_POLICIES: readonly ChildFailurePolicy[] = ['fail', 'ignore', 'continue'];

/** How a child ended, as its parent's `childResults()` shows it; `ignored`: dead-lettered or cancelled under `onChildFailure: 'ignore'`. */
export type ChildOutcome = 'handled' | 'dead-lettered' | 'cancelled' | 'ignored';

export interface ChildResult {
  readonly outcome: ChildOutcome;
  /** What the child's handler gave `delivery.result()`, parsed. */
  readonly result?: unknown;
  /** Why it failed, for a dead-lettered or cancelled child. */
  readonly error?: string;
}

/** One child of a parent, by type and id: its edge's name is `"type|id"`. */
export interface ChildRef {
  readonly type: string;
  readonly id: string;
}

export interface FlowEdge {
  readonly child: ChildRef;
  readonly policy: ChildFailurePolicy;
  /** The child's queue tag: where it is stored (its partition). */
  readonly tag: string;
}

/** A parent's flow record as read. */
export interface FlowRecord {
  /** Edges not done yet. */
  readonly left: number;
  readonly edges: ReadonlyArray<FlowEdge & { readonly state: 'pending' | 'done' | 'failed' }>;
}

/** What linking a child answered: linked (stored, or ahead of its store), done already (handled within the idempotency window), dead (its notice queued), or missing. */
export type LinkResult = 'linked' | 'ahead' | 'done' | 'dead' | 'missing';
const LINK_RESULTS: readonly LinkResult[] = ['missing', 'linked', 'ahead', 'done', 'dead'];

/** What a notice did to its parent. */
export type NoticeEffect = 'none' | 'applied' | 'released' | 'dead-lettered';
const NOTICE_EFFECTS: readonly NoticeEffect[] = ['none', 'applied', 'released', 'dead-lettered'];

/** Most outbox entries one delivery reads. */
const OUTBOX_STEP = 100;
/** How long after its first application a notice is applied once more, then dropped (FlowStore.confirm). */
export const CONFIRM_AFTER_MS = 5_000;

interface Notice {
  readonly k: string;
  readonly s: number;
  readonly p: ReadonlyArray<readonly [string, string]>;
  readonly o: string;
  readonly r?: string;
  readonly e?: string;
}

export const edgeName = (child: ChildRef): string => `${child.type}|${child.id}`;

export class FlowStore {
  /** Told of each parent a notice dead-lettered (reason dependency), for the metric. */
  onDependencyDeadLetter: ((type: string) => void) | undefined;

  constructor(
    private readonly client: RedisClient,
    private readonly layout: RedisLayout,
    private readonly scripts: LuaScripts,
    private readonly wakeChannel: string,
  ) {}

  /** Stores a parent WAITING for `edges` (or adds those it lacks while it waits): 'waiting', 'merged' or 'duplicate'. */
  async park(keys: TypeKeys, id: string, due: DueSpec, body: string, edges: readonly FlowEdge[]): Promise<'waiting' | 'merged' | 'duplicate'> {
    const at = 'atMs' in due ? due.atMs : -1;
    const delay = 'delayMs' in due ? due.delayMs : 0;
    const reply = await this.scripts.call('flow-park', keys, { id, delayMs: delay, atMs: at, body, edges: edges.map((e) => ({ key: edgeName(e.child), policy: e.policy, tag: e.tag })) });
    return reply === 1 ? 'waiting' : reply === 2 ? 'merged' : 'duplicate';
  }

  /** Links child `child` (in `childKeys`) to the parent `parentId` of `parentKeys`; `expect`: the caller stores the child next. */
  async link(childKeys: TypeKeys, child: ChildRef, parentKeys: TypeKeys, parentId: string, expect: boolean): Promise<LinkResult> {
    const reply = await this.scripts.call('flow-link', childKeys, { id: child.id, edge: edgeName(child), parentTag: parentKeys.tag, parentId, expect });
    return LINK_RESULTS[reply] ?? 'missing';
  }

  /** Applies a child's outcome to one parent (notice number `seq`). */
  async notify(parentKeys: TypeKeys, parentId: string, edge: string, seq: number, outcome: string, result = '', failure = ''): Promise<NoticeEffect> {
    const reply = await this.scripts.call('flow-notice', parentKeys, { id: parentId, edge, seq, outcome, result, failure, wakeChannel: this.wakeChannel, wakeTag: parentKeys.tag });
    const effect = NOTICE_EFFECTS[reply] ?? 'none';
    if (effect === 'dead-lettered') {
      this.onDependencyDeadLetter?.(parentKeys.type);
      // A parent that is itself a child queued a notice for its own parents: up the tree it goes.
      await this.deliver(parentKeys);
    }
    return effect;
  }

  /**
   * Applies the notices waiting in a queue's outbox to their parents, then
   * takes each from the outbox: a crash in between leaves it for the next
   * delivery, which applies nothing twice. `onEffect` is told of each.
   */
  async deliver(childKeys: TypeKeys, onEffect: (effect: NoticeEffect, parent: TypeKeys) => void = () => {}): Promise<number> {
    await this.confirm(childKeys, onEffect);
    let delivered = 0;
    // Notices kept for a parent that is moving between partitions stay at the head, for the next delivery.
    let kept = 0;
    for (;;) {
      const entries = await this.scripts.bounded('flow notices', () => this.client.lrange(childKeys.notices, kept, kept + OUTBOX_STEP - 1));
      // Applied side by side: the calls share the connection's pipeline, and Redis runs them in the
      // order sent; two notices of one edge need no order anyway (a newer one makes an older one a no-op).
      const keep = await Promise.all(entries.map((raw) => this.applyEntry(raw, onEffect)));
      const done = entries.filter((_, i) => !keep[i]);
      kept += entries.length - done.length;
      // Moved to the applied set in one transaction once applied (one slot): a crash before leaves them for the next delivery.
      if (done.length > 0) {
        const now = Date.now();
        const multi = this.client.multi();
        for (const raw of done) multi.lrem(childKeys.notices, 1, raw).zadd(childKeys.noticesApplied, now, raw);
        await this.scripts.bounded('flow notices', () => multi.exec());
        delivered += done.length;
      }
      if (entries.length < OUTBOX_STEP) return delivered;
    }
  }

  /**
   * Applies each notice once more CONFIRM_AFTER_MS after it was first
   * applied, then drops it: should a failover have lost the parent's write
   * (replication is asynchronous) after its outbox entry went, this makes it
   * good; a second application of one that held changes nothing (its number).
   */
  private async confirm(childKeys: TypeKeys, onEffect: (effect: NoticeEffect, parent: TypeKeys) => void): Promise<void> {
    const due = await this.scripts.bounded('flow notices', () => this.client.zrange(childKeys.noticesApplied, '-inf', String(Date.now() - CONFIRM_AFTER_MS), 'BYSCORE', 'LIMIT', 0, OUTBOX_STEP));
    if (due.length === 0) return;
    const keep = await Promise.all(due.map((raw) => this.applyEntry(raw, onEffect)));
    const done = due.filter((_, i) => !keep[i]);
    if (done.length > 0) await this.scripts.bounded('flow notices', () => this.client.zrem(childKeys.noticesApplied, ...done));
  }

  /** Applies one outbox entry to each of its parents; true when one of them is moving between partitions (kept for later). */
  private async applyEntry(raw: string, onEffect: (effect: NoticeEffect, parent: TypeKeys) => void): Promise<boolean> {
    const notice = parseNotice(raw);
    let keep = false;
    for (const [tag, parentId] of notice?.p ?? []) {
      const parent = this.keysOfTag(tag);
      if (!parent || !notice) continue;
      const applied = await this.applyAnywhere(parent, parentId, notice);
      if (applied === 'moving') keep = true;
      else onEffect(applied.effect, applied.parent);
    }
    return keep;
  }

  /**
   * Applies a notice to its parent where the link says it is, or, when it is
   * not there, where each partition setting of its type in use would put it
   * (a change of partitions moved it: lua/migrate-out.lua carries its record).
   * 'moving' while settings are changing and it is in none: kept for later.
   */
  private async applyAnywhere(parent: TypeKeys, parentId: string, notice: Notice): Promise<{ effect: NoticeEffect; parent: TypeKeys } | 'moving'> {
    const apply = (at: TypeKeys) => this.notify(at, parentId, notice.k, notice.s, notice.o, notice.r ?? '', notice.e ?? '');
    const effect = await apply(parent);
    if (effect !== 'none') return { effect, parent };
    const settings = (await this.scripts.bounded('flow notices', () => this.client.hkeys(this.layout.layoutOf(parent.type)))).map(Number).filter((n) => Number.isInteger(n) && n >= 1);
    for (const partitions of settings) {
      const there = this.layout.forEvent({ type: parent.type, partitions }, parentId);
      if (there.tag === parent.tag) continue;
      const moved = await apply(there);
      if (moved !== 'none') return { effect: moved, parent: there };
    }
    const inMoving = await this.scripts.bounded('flow notices', () => this.client.hexists(parent.moving, parentId));
    return settings.length > 1 || inMoving === 1 ? 'moving' : { effect: 'none', parent };
  }

  /** Whether an event others would wait for is stored, or was handled (or cancelled) within the idempotency window. */
  async presence(keys: TypeKeys, id: string): Promise<'stored' | 'done' | 'missing'> {
    const replies = await this.scripts.bounded('after', () => this.client.multi().hexists(keys.meta, id).zscore(keys.recent, id).time().exec());
    const [[, stored], [, mark], [, time]] = (replies ?? []) as Array<[unknown, unknown]> as [[unknown, unknown], [unknown, unknown], [unknown, unknown]];
    if (stored === 1) return 'stored';
    const [seconds, micros] = (time as [string, string] | undefined) ?? ['0', '0'];
    return mark !== null && Number(mark) > Number(seconds) * 1000 + Number(micros) / 1000 ? 'done' : 'missing';
  }

  /**
   * Cancels an event (`cancelOne`: lua/cancel.lua), applies the notice it
   * sent its own parents, and with `cascade`, cancels the children it still
   * waited for, and theirs: resolves whether it existed.
   */
  async cancel(keys: TypeKeys, id: string, cascade: boolean, cancelOne: (keys: TypeKeys, id: string) => Promise<boolean>, seen = new Set<string>()): Promise<boolean> {
    seen.add(`${keys.tag}\n${id}`);
    const record = cascade ? await this.record(keys, id) : undefined;
    if (!(await cancelOne(keys, id))) return false;
    await this.deliver(keys);
    for (const edge of record?.edges ?? []) {
      const child = edge.state === 'done' ? undefined : this.keysOfTag(edge.tag);
      if (child && !seen.has(`${child.tag}\n${edge.child.id}`)) await this.cancel(child, edge.child.id, true, cancelOne, seen);
    }
    return true;
  }

  /**
   * Parents waiting (the first `most` of each queue) for children that no
   * longer exist and can send no notice: not stored, not moving, and either
   * still linked (purged, drained or obliterated, or never stored after a
   * flow call was cut short) or never linked (cut short before). A child
   * settled whose notice is on its way is not one.
   */
  async orphans(queues: readonly TypeKeys[], most = 100): Promise<Array<{ readonly id: string; readonly missing: readonly ChildRef[] }>> {
    const found: Array<{ id: string; missing: ChildRef[] }> = [];
    for (const queue of queues) {
      const ids = await this.scripts.bounded('flow orphans', () => this.client.zrange(queue.waiting, '0', String(most - 1)));
      for (const id of ids) {
        const missing: ChildRef[] = [];
        for (const edge of (await this.record(queue, id))?.edges ?? []) {
          const child = edge.state === 'pending' ? this.keysOfTag(edge.tag) : undefined;
          if (!child) continue;
          const replies = await this.scripts.bounded('flow orphans', () =>
            this.client.multi().hexists(child.meta, edge.child.id).hexists(child.moving, edge.child.id).hexists(child.parents, edge.child.id).exec(),
          );
          const [stored, moving, linked] = (replies ?? []).map(([, v]) => v);
          // Not linked, not stored: never linked (a flow call cut short), unless it settled and its notice is on its way.
          if (stored === 0 && moving === 0 && (linked === 1 || !(await this.noticeOnItsWay(child, edgeName(edge.child))))) missing.push(edge.child);
        }
        if (missing.length > 0) found.push({ id, missing });
      }
    }
    return found;
  }

  /** Whether a notice of `edge` waits in the child's queue's outbox, or was applied lately. */
  private async noticeOnItsWay(child: TypeKeys, edge: string): Promise<boolean> {
    const [queued, applied] = await Promise.all([
      this.scripts.bounded('flow orphans', () => this.client.lrange(child.notices, 0, -1)),
      this.scripts.bounded('flow orphans', () => this.client.zrange(child.noticesApplied, '0', '-1')),
    ]);
    return [...queued, ...applied].some((raw) => parseNotice(raw)?.k === edge);
  }

  /** A parent's flow record, or undefined when it has none (not a parent, or settled). */
  async record(keys: TypeKeys, id: string): Promise<FlowRecord | undefined> {
    return recordOf(await this.scripts.bounded('flow record', () => this.client.hget(keys.flows, id)));
  }

  /** The keys of a queue tag (`type` or `type#partition`; neither holds '#' otherwise). */
  keysOfTag(tag: string): TypeKeys | undefined {
    const hash = tag.lastIndexOf('#');
    if (hash < 0) return this.layout.forType(tag);
    const partition = Number(tag.slice(hash + 1));
    return Number.isInteger(partition) && partition >= 0 ? this.layout.forType(tag.slice(0, hash), partition) : undefined;
  }
}

function parseNotice(raw: string): Notice | undefined {
  try {
    const notice = JSON.parse(raw) as Notice;
    // An empty Lua table encodes as {}: a notice with no parents left is applied to none.
    return { ...notice, p: Array.isArray(notice.p) ? notice.p : [] };
  } catch {
    return undefined;
  }
}

const EDGE_STATES = { p: 'pending', d: 'done', f: 'failed' } as const;

/** A flow record as lua/flow-park.lua and lua/flow-notice.lua write it, read. */
export function recordOf(raw: string | null): FlowRecord | undefined {
  if (raw === null) return undefined;
  let parsed: { n?: number; e?: Record<string, [string, string, string, number]> };
  try {
    parsed = JSON.parse(raw) as typeof parsed;
  } catch {
    return undefined;
  }
  const edges = Object.entries(parsed.e ?? {}).map(([name, [state, policy, tag]]) => {
    const cut = name.indexOf('|');
    return { child: { type: name.slice(0, cut), id: name.slice(cut + 1) }, state: EDGE_STATES[state as keyof typeof EDGE_STATES] ?? 'pending', policy: policy as ChildFailurePolicy, tag };
  });
  return { left: parsed.n ?? 0, edges };
}

/** A parent's children's results as lua/flow-notice.lua keeps them (`{edge, JSON, ...}`, HGETALL's reply), read. */
export function childResultsOf(flat: readonly string[]): Record<string, ChildResult> {
  const results: Record<string, ChildResult> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) {
    let r: { o: ChildOutcome; r?: string; e?: string };
    try {
      r = JSON.parse(flat[i + 1]!) as typeof r;
    } catch {
      continue;
    }
    results[flat[i]!] = { outcome: r.o, ...(r.r !== undefined ? { result: parseResult(r.r) } : {}), ...(r.e !== undefined ? { error: r.e } : {}) };
  }
  return results;
}

function parseResult(json: string): unknown {
  try {
    return JSON.parse(json);
  } catch {
    return json;
  }
}
