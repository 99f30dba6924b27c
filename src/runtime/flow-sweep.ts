import type { FlowStore } from '../redis/flow-store';
import type { TypeKeys } from '../redis/redis-layout';
import { METRIC, type Metrics } from './metrics';

/** How often a dispatcher looks at its queue's outbox of flow notices when nothing asked it to. */
export const FLOW_SWEEP_EVERY_MS = 5_000;

/**
 * A queue's outbox of flow notices (since 0.6; src/redis/flow-store.ts),
 * applied by its type's dispatcher after its looks: at once when a result
 * here queued one (poke), else after a look at most every FLOW_SWEEP_EVERY_MS,
 * which finds the notices of an instance that crashed before it applied its
 * own (the look every instance makes when one goes silent pokes it too).
 */
export class FlowSweep {
  private last = 0;
  private poked = false;

  constructor(
    private readonly store: FlowStore,
    private readonly keys: TypeKeys,
    metrics: Metrics,
  ) {
    store.onDependencyDeadLetter ??= (type) => metrics.count(METRIC.deadLettered, { type, group: 'default', reason: 'dependency' });
  }

  /** A result here queued a notice: the next look applies it. */
  poke(): void {
    this.poked = true;
  }

  /** Between looks: applies the notices a result here queued, and sends nothing otherwise. */
  async ifPoked(): Promise<void> {
    if (this.poked) await this.afterLook();
  }

  /** Called after each look; rejects like any Redis call (the dispatcher backs off). */
  async afterLook(now = Date.now()): Promise<void> {
    if (!this.poked && now - this.last < FLOW_SWEEP_EVERY_MS) return;
    this.poked = false;
    this.last = now;
    await this.store.deliver(this.keys);
  }
}
