import type { EventRoute } from '../core/delayed-event.decorator';
import type { PartitionMoves } from '../redis/partition-moves';
import type { Metrics } from '../runtime/metrics';
import { Repartitioner } from '../runtime/repartitioner';

/** What the repartitioners of an instance are told to and asked (the same for every type). */
export interface RepartitionHooks {
  /** Resolves once the connection is ready (a sweep sent early would fail). */
  ready(): Promise<void> | undefined;
  /** The type's queues may claim again after a move's limits held them. */
  onResumed(route: EventRoute): void;
  /** Whether a handler of the type here has flow limits. */
  hasLimits(type: string): boolean;
}

/** Per type handled here, the loop that moves its events to this instance's partitions (src/runtime/repartitioner.ts). */
export class Repartitioners {
  private readonly byType = new Map<string, Repartitioner>();

  constructor(
    private readonly moves: PartitionMoves,
    private readonly metrics: Metrics,
    private readonly hooks: RepartitionHooks,
  ) {}

  /** Starts the type's, unless it runs. */
  startFor(route: EventRoute): void {
    if (this.byType.has(route.type)) return;
    const { hooks } = this;
    const repartitioner = new Repartitioner(
      route,
      this.moves,
      this.metrics,
      () => hooks.ready(),
      undefined,
      () => hooks.onResumed(route),
      () => hooks.hasLimits(route.type),
    );
    this.byType.set(route.type, repartitioner);
    repartitioner.start();
  }

  /** Stops the type's: resolves once its move step under way is done. */
  stopFor(type: string): Promise<void> {
    const repartitioner = this.byType.get(type);
    this.byType.delete(type);
    return repartitioner?.stop() ?? Promise.resolve();
  }

  async stopAll(): Promise<void> {
    const all = [...this.byType.values()];
    this.byType.clear();
    await Promise.all(all.map((r) => r.stop()));
  }
}
