import { type DelayedEventInstance, type EventRoute, eventRouteOf } from '../core/delayed-event.decorator';
import { type Delay, dateToMillis, delayToMillis } from '../core/duration';
import { InvalidArgumentError, describe } from '../core/errors';
import { type AllowedKeys, checkArgumentKeys } from '../core/option-keys';
import { CHILD_FAILURE_POLICIES, type ChildFailurePolicy, type ChildRef, type FlowEdge, type FlowStore, edgeName } from '../redis/flow-store';
import type { RedisLayout, TypeKeys } from '../redis/redis-layout';
import type { DueSpec, EnqueueStatus } from '../redis/script-results';
import { METRIC, type Metrics } from '../runtime/metrics';
import type { Dependency, EnqueueOptions } from './enqueue-options';

export type { Dependency } from './enqueue-options';

// Flows and dependencies (since 0.6; docs/flows.md): a parent stored WAITING
// before any child is stored or linked, so that every child's notice finds
// it; children stored (or found stored) and linked to it; the parent due
// once every child is done and its own delay has passed.

/** A node of enqueueFlow's tree. `onChildFailure` governs the edge from this node to its parent (ignored on the root). */
export interface Flow<T extends DelayedEventInstance = DelayedEventInstance> {
  readonly event: T;
  /** Due this long after the call once its children are done (default 0), or at a Date. */
  readonly delay?: Delay | Date;
  /** enqueue's options; a node with children takes only context, priority and maxAttempts. */
  readonly options?: EnqueueOptions;
  /** Events this one waits for: at most 1,000. */
  readonly children?: readonly Flow[];
  /** What this node's parent does when this node is dead-lettered or cancelled: 'fail' (default), 'ignore' or 'continue'. */
  readonly onChildFailure?: ChildFailurePolicy;
}

/** What enqueueFlow stored, node by node: 'scheduled' (stored: waiting, when it has children), 'duplicate' (already stored or handled; nothing below it was stored), or what enqueue answered for a leaf. */
export interface FlowStatus {
  readonly status: EnqueueStatus;
  readonly children: readonly FlowStatus[];
}

/** Most children (or `after` entries) one parent waits for. */
export const MAX_CHILDREN = 1_000;
/** Deepest flow tree taken: deeper is surely a mistake (a node that holds itself). */
const MAX_DEPTH = 100;

const FLOW_KEYS = { event: true, delay: true, options: true, children: true, onChildFailure: true } as const satisfies AllowedKeys<Flow>;
const DEPENDENCY_KEYS = { type: true, id: true, onChildFailure: true } as const satisfies AllowedKeys<Dependency>;
/** What a parent's own options may hold: it waits, so no window or replace applies. */
const PARENT_OPTIONS = new Set(['context', 'priority', 'maxAttempts']);

export interface FlowsParts {
  readonly layout: RedisLayout;
  readonly store: FlowStore;
  readonly metrics: Metrics;
  /** Told of each type a parent is stored for (health() then looks at its parents). */
  readonly onStored: (route: EventRoute) => void;
  /** Where a type name's event `id` is stored; undefined when nothing of the type is. */
  keysOf(type: string, id: string): Promise<TypeKeys | undefined>;
}

interface Checked {
  readonly node: Flow;
  readonly due: DueSpec;
  readonly route: EventRoute;
  readonly id: string;
  readonly policy: ChildFailurePolicy;
  readonly children: readonly Checked[];
  body?: string;
}

/** What Flows asks of the enqueue path (src/service/enqueuer.ts). */
export interface FlowEnqueuer {
  /** Stores a leaf as enqueue does. */
  enqueue(event: DelayedEventInstance, due: () => DueSpec, options: EnqueueOptions): Promise<EnqueueStatus>;
  /** A parent's body, encoded and checked as enqueue would store it. */
  encodeParent(event: DelayedEventInstance, options: EnqueueOptions, call: string, due?: DueSpec, leaf?: boolean): { readonly route: EventRoute; readonly id: string; readonly body: string };
  /** Where an enqueue with `after` goes. */
  withDependencies: ((event: DelayedEventInstance, due: DueSpec, options: EnqueueOptions) => Promise<EnqueueStatus>) | undefined;
}

export class Flows {
  constructor(
    private readonly parts: FlowsParts,
    private readonly enqueuer: FlowEnqueuer,
  ) {
    enqueuer.withDependencies = (event, due, options) => this.enqueueAfter(event, due, options);
    parts.store.onDependencyDeadLetter = (type) => parts.metrics.count(METRIC.deadLettered, { type, group: 'default', reason: 'dependency' });
  }

  /** Stores a flow: every node checked first (nothing is stored when one is bad), then each parent before its children. */
  async enqueueFlow(flow: Flow): Promise<FlowStatus> {
    const root = checkNode(flow, 'flow', 0);
    // Every node encoded (and a leaf's options checked as enqueue checks them) before anything is stored;
    // a node that waits for itself, or for one of its ancestors, would wait for ever.
    const path = new Set<string>();
    const encode = (node: Checked, what: string): void => {
      const name = edgeName({ type: node.route.type, id: node.id });
      if (path.has(name)) throw new InvalidArgumentError(what, `is ${name}, which it would then wait for itself: an event cannot be its own descendant`);
      const leaf = node.children.length === 0;
      node.body = this.enqueuer.encodeParent(node.node.event, node.node.options ?? {}, what, node.due, leaf).body;
      path.add(name);
      node.children.forEach((c, i) => encode(c, `${what}.children[${i}]`));
      path.delete(name);
    };
    encode(root, 'enqueueFlow');
    return this.store(root, undefined);
  }

  /** enqueue with `after`: the event waits for events already stored (or handled within the idempotency window). */
  async enqueueAfter(event: DelayedEventInstance, due: DueSpec, options: EnqueueOptions): Promise<EnqueueStatus> {
    const after = checkAfter(options.after);
    const { after: _, ...own } = options;
    checkParentOptions(own, 'enqueue');
    const parent = this.enqueuer.encodeParent(event, own, 'enqueue');
    const parentKeys = this.parts.layout.forEvent(parent.route, parent.id);
    const edges: Array<FlowEdge & { readonly keys: TypeKeys }> = [];
    for (const [i, dependency] of after.entries()) {
      const type = typeof dependency.type === 'string' ? dependency.type : eventRouteOf(dependency.type).type;
      const keys = typeof dependency.type === 'string' ? await this.parts.keysOf(type, dependency.id) : this.parts.layout.forEvent(eventRouteOf(dependency.type), dependency.id);
      const child = { type, id: dependency.id };
      if (type === parent.route.type && child.id === parent.id) throw new InvalidArgumentError(`after[${i}]`, `names the event itself (${edgeName(child)}): an event cannot wait for itself`);
      if (!keys || (await this.parts.store.presence(keys, dependency.id)) === 'missing') {
        throw new InvalidArgumentError(`after[${i}]`, `names ${edgeName(child)}, which is neither stored nor handled within the idempotency window: enqueue it first, or leave it out`);
      }
      edges.push({ child, policy: dependency.onChildFailure ?? 'fail', tag: keys.tag, keys });
    }
    const parked = await this.parts.store.park(parentKeys, parent.id, due, parent.body, edges);
    this.parts.onStored(parent.route);
    if (parked === 'duplicate') return 'duplicate';
    // Waiting already (the call sent again after a crash): its edges are linked again, which changes nothing twice.
    for (const edge of edges) await this.linkTo(edge.keys, edge.child, parentKeys, parent.id, false);
    return parked === 'waiting' ? 'scheduled' : 'duplicate';
  }

  /**
   * Stores an event already encoded (a recurring schedule's backfilled
   * occurrence, src/service/schedule-controls.ts) that waits until `previous`
   * settled, however it ends (onChildFailure 'continue').
   */
  async enqueueEncodedAfter(
    event: { readonly route: EventRoute; readonly id: string; readonly body: string },
    due: DueSpec,
    previous: { readonly route: EventRoute; readonly id: string },
  ): Promise<EnqueueStatus> {
    const parentKeys = this.parts.layout.forEvent(event.route, event.id);
    const keys = this.parts.layout.forEvent(previous.route, previous.id);
    const child = { type: previous.route.type, id: previous.id };
    const parked = await this.parts.store.park(parentKeys, event.id, due, event.body, [{ child, policy: 'continue', tag: keys.tag }]);
    this.parts.onStored(event.route);
    if (parked === 'duplicate') return 'duplicate';
    await this.linkTo(keys, child, parentKeys, event.id, false);
    return parked === 'waiting' ? 'scheduled' : 'duplicate';
  }

  private async store(node: Checked, parent: { readonly keys: TypeKeys; readonly id: string } | undefined): Promise<FlowStatus> {
    const keys = this.parts.layout.forEvent(node.route, node.id);
    const child = { type: node.route.type, id: node.id };
    if (parent && (await this.linkTo(keys, child, parent.keys, parent.id, true)) === 'done') return skipped(node);
    if (node.children.length === 0) {
      const status = await this.enqueuer.enqueue(node.node.event, () => node.due, node.node.options ?? {});
      // Throttled, or a duplicate of an event gone since: nothing stored will settle, so the edge is done now.
      if (parent && (status === 'throttled' || status === 'duplicate') && (await this.parts.store.presence(keys, node.id)) !== 'stored') {
        await this.parts.store.notify(parent.keys, parent.id, edgeName(child), 1, 'handled');
      }
      return { status, children: [] };
    }
    const edges = node.children.map((c) => ({ child: { type: c.route.type, id: c.id }, policy: c.policy, tag: this.parts.layout.forEvent(c.route, c.id).tag }));
    const parked = await this.parts.store.park(keys, node.id, node.due, node.body ?? '', edges);
    this.parts.onStored(node.route);
    if (parked === 'duplicate') return skipped(node);
    const children = await Promise.all(node.children.map((c) => this.store(c, { keys, id: node.id })));
    return { status: parked === 'waiting' ? 'scheduled' : 'duplicate', children };
  }

  /** Links a child to its parent; a child already done (or gone) is told to the parent at once. */
  private async linkTo(childKeys: TypeKeys, child: ChildRef, parentKeys: TypeKeys, parentId: string, expect: boolean): Promise<string> {
    const linked = await this.parts.store.link(childKeys, child, parentKeys, parentId, expect);
    // Handled within the idempotency window: no notice will come, so the edge is done now. Gone since it
    // was looked at (cancelled with no mark): a failure of the edge. Either is the edge's first notice.
    if (linked === 'done') await this.parts.store.notify(parentKeys, parentId, edgeName(child), 1, 'handled');
    if (linked === 'missing') await this.parts.store.notify(parentKeys, parentId, edgeName(child), 1, 'cancelled', '', 'not stored when linked');
    if (linked === 'dead') await this.deliver(childKeys);
    return linked;
  }

  /** Applies a queue's outbox of notices. */
  deliver(keys: TypeKeys): Promise<number> {
    return this.parts.store.deliver(keys);
  }
}

function skipped(node: Checked): FlowStatus {
  return { status: 'duplicate', children: node.children.map(skipped) };
}

function dueOf(delay: Delay | Date | undefined, what: string): DueSpec {
  try {
    return delay instanceof Date ? { atMs: dateToMillis(delay) } : { delayMs: delayToMillis(delay ?? 0) };
  } catch (error) {
    throw new InvalidArgumentError(`${what}.delay`, error instanceof Error ? error.message : String(error));
  }
}

function checkNode(node: Flow, what: string, depth: number): Checked {
  if (node === null || typeof node !== 'object') throw new InvalidArgumentError(what, `must be { event, delay?, options?, children?, onChildFailure? }, got ${describe(node)}`);
  if (depth > MAX_DEPTH) throw new InvalidArgumentError(what, `is deeper than ${MAX_DEPTH} levels: does a node hold itself?`);
  checkArgumentKeys(node, FLOW_KEYS, what);
  const event = node.event;
  if (event === null || typeof event !== 'object') throw new InvalidArgumentError(`${what}.event`, `must be an instance of a @DelayedEvent class, got ${describe(event)}`);
  const route = eventRouteOf(event.constructor);
  const policy = node.onChildFailure ?? 'fail';
  if (!CHILD_FAILURE_POLICIES.includes(policy)) throw new InvalidArgumentError(`${what}.onChildFailure`, `must be 'fail', 'ignore' or 'continue', got ${describe(node.onChildFailure)}`);
  const children = node.children ?? [];
  if (!Array.isArray(children)) throw new InvalidArgumentError(`${what}.children`, `must be an array of flows, got ${describe(children)}`);
  if (children.length > MAX_CHILDREN) throw new InvalidArgumentError(`${what}.children`, `holds ${children.length} children; a parent waits for at most ${MAX_CHILDREN}: add a level between`);
  const options = node.options ?? {};
  if ('after' in options) throw new InvalidArgumentError(`${what}.options.after`, 'is not taken in a flow: give the events it waits for as children');
  if (children.length > 0) checkParentOptions(options, what);
  return { node, due: dueOf(node.delay, what), route, id: String(event.id), policy, children: children.map((c, i) => checkNode(c, `${what}.children[${i}]`, depth + 1)) };
}

function checkParentOptions(options: EnqueueOptions, what: string): void {
  for (const key of Object.keys(options)) {
    if (!PARENT_OPTIONS.has(key) && (options as Record<string, unknown>)[key] !== undefined) {
      throw new InvalidArgumentError(`${what} options.${key}`, 'a parent waits for its children: it takes only context, priority and maxAttempts');
    }
  }
}

function checkAfter(after: unknown): readonly Dependency[] {
  if (!Array.isArray(after) || after.length === 0 || after.length > MAX_CHILDREN) {
    throw new InvalidArgumentError('after', `must be an array of 1 to ${MAX_CHILDREN} { type, id, onChildFailure? }, got ${describe(after)}`);
  }
  return after.map((entry: unknown, i) => {
    if (entry === null || typeof entry !== 'object') throw new InvalidArgumentError(`after[${i}]`, `must be { type, id, onChildFailure? }, got ${describe(entry)}`);
    checkArgumentKeys(entry, DEPENDENCY_KEYS, `after[${i}]`);
    const { type, id, onChildFailure } = entry as Dependency;
    if (typeof type !== 'string' && typeof type !== 'function') throw new InvalidArgumentError(`after[${i}].type`, `must be an event class or a type name, got ${describe(type)}`);
    if (typeof type === 'function') eventRouteOf(type);
    if (typeof id !== 'string' || id === '') throw new InvalidArgumentError(`after[${i}].id`, `must be a non-empty string, got ${describe(id)}`);
    if (onChildFailure !== undefined && !CHILD_FAILURE_POLICIES.includes(onChildFailure)) {
      throw new InvalidArgumentError(`after[${i}].onChildFailure`, `must be 'fail', 'ignore' or 'continue', got ${describe(onChildFailure)}`);
    }
    return entry as Dependency;
  });
}
