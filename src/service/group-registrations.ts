import type { LuaScripts } from '../redis/lua-scripts';
import { DEFAULT_GROUP, type TypeKeys } from '../redis/redis-layout';
import type { DispatcherRegistrations } from '../runtime/dispatcher';
import { METRIC, type Metrics } from '../runtime/metrics';
import type { Errands } from '../runtime/background-service';
import { OutageBackoff } from '../runtime/outage-backoff';
import type { ServiceLog } from '../runtime/service-log';

export interface GroupRegistrationParts {
  /** The command connection's scripts and the handlers' own: a registration goes on both. */
  readonly scripts: () => readonly LuaScripts[];
  readonly metrics: Metrics;
  readonly log: ServiceLog;
  readonly isClosing: () => boolean;
  /** Where the attempts run: none is sent once they stop. */
  readonly errands: Errands;
  /** The groups this instance handles `type` in now. */
  readonly groupsOf: (type: string) => string[];
  /** A named group was registered: every instance's dispatchers of the queue look (a quiet one registers its default group then). */
  readonly onNamedGroup?: (queueTag: string) => void;
}

/**
 * The subscriber groups this instance registers, and restores when Redis
 * loses them: a queue's marker (lua/register-group.lua) that changed, or is
 * missing at a dispatch, says so (lua/dispatch-due.lua).
 */
export class GroupRegistrations {
  /** Per queue tag, the marker value its dispatchers last read (markerSeen). */
  private readonly markers = new Map<string, string>();

  constructor(private readonly parts: GroupRegistrationParts) {}

  /**
   * Registers `group` of a queue, retrying through an outage. Sent on both
   * connections: an enqueue made after addHandler (command connection) and
   * this instance's first dispatch (handlers' connection) each run after it.
   */
  register(shared: TypeKeys, group: string, fresh = true): void {
    const backoff = new OutageBackoff();
    const { errands } = this.parts;
    const attempt = (): void =>
      errands.run((signal) =>
        Promise.all(this.parts.scripts().map((scripts) => scripts.registerGroup(shared, group, signal, fresh))).then(
          () => {
            if (group !== DEFAULT_GROUP) this.parts.onNamedGroup?.(shared.tag);
          },
          () => {
            this.parts.metrics.count(METRIC.redisErrors, { loop: 'connection', type: shared.type });
            // Not once its handlers here are gone (removeHandler, removeGroup): a retry would register it again.
            errands.after(backoff.next(), () => {
              if (this.parts.groupsOf(shared.type).includes(group)) attempt();
            });
          },
        ),
      );
    attempt();
  }

  /**
   * What the type's dispatcher of a queue sends of this instance's groups
   * (DispatcherRegistrations): `group` is the registering handler's, not yet
   * among those groupsOf() lists when the dispatcher first looks.
   */
  forDispatcher(shared: TypeKeys, group: string): DispatcherRegistrations {
    return {
      groups: () => [...new Set([group, ...this.parts.groupsOf(shared.type)])],
      markerSeenBefore: () => this.markers.has(shared.tag),
      onMarker: (marker: string) => this.markerSeen(shared, marker),
    };
  }

  /**
   * A queue's marker, as a dispatcher here read it. A value other than the
   * one seen before means Redis lost this queue's registrations (it restarted
   * empty, was flushed, or failed over to an empty replica): every named
   * group of this instance on the queue is registered again, and the loss
   * said once.
   */
  private markerSeen(shared: TypeKeys, marker: string): void {
    const seen = this.markers.get(shared.tag);
    this.markers.set(shared.tag, marker);
    if (seen === undefined || seen === marker || this.parts.isClosing()) return;
    const groups = this.parts.groupsOf(shared.type);
    const named = groups.filter((g) => g !== DEFAULT_GROUP);
    if (named.length === 0) return;
    // A marker set by a handler that started an obliterated type again (lua/register-group.lua) is no data loss.
    if (marker.startsWith('o')) this.parts.log.startedAgain({ type: shared.type, queue: shared.tag, groups: named });
    else this.parts.log.registrationsLost({ type: shared.type, queue: shared.tag, groups: named });
    // Restored, not fresh: an obliterated queue (its tombstone) is not brought back by them.
    for (const group of named) this.register(shared, group, false);
    // The default group's handlers here keep getting events, as add() arranged.
    if (groups.includes(DEFAULT_GROUP)) this.register(shared, DEFAULT_GROUP, false);
  }
}
