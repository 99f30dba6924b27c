import type { Flow, FlowStatus, Flows } from './flows';
import { InspectionCalls } from './service-inspection';

/**
 * The service's flow calls (since 0.6; docs/flows.md), each a delegate to its
 * Flows (src/service/flows.ts). DelayedEventService extends it.
 */
export abstract class FlowCalls extends InspectionCalls {
  protected abstract readonly flows: Flows;

  /**
   * Stores a tree of events in which each parent waits for its children: the
   * parent is stored WAITING before any child, and due once every child is
   * done (by each edge's `onChildFailure`) and its own delay has passed.
   * Resolves what was stored, node by node; sending the same flow again
   * completes one a crash cut short.
   */
  enqueueFlow(flow: Flow): Promise<FlowStatus> {
    return this.flows.enqueueFlow(flow);
  }
}
