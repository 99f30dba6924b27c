import type { EventRoute } from '../core/delayed-event.decorator';
import type { PartitionMoves } from '../redis/partition-moves';
import type { TypeKeys } from '../redis/redis-layout';
import type { BackgroundService } from './background-service';
import { METRIC, type Metrics } from './metrics';
import { OutageBackoff } from './outage-backoff';

/** How often a sweep looks while another setting is in use or events wait to move; and when all is in place. */
const BUSY_SWEEP_MS = 2_000;
const IDLE_SWEEP_MS = 60_000;
/** A setting no instance announced for this long is no longer in use. */
export const SETTING_STALE_MS = 10 * 60_000;
/** A current setting no instance announced for this long (its instances stopped) is taken over. */
const CURRENT_STALE_MS = 3 * 60_000;
/** How often this setting's own queues are scanned for ids another setting in use put there. */
const MINE_SCAN_MS = 30_000;

/**
 * Moves a type's stored events to the partitions this instance's setting
 * gives them (docs/changing-event-classes.md, "Partitions"): run by every
 * instance that handles the type, so changing `partitions` needs no drain.
 *
 * Each sweep announces this setting, then moves the events out of every queue
 * this setting does not read (found by probing once at start, then from the
 * settings other instances announce) and, while another setting is in use,
 * out of this setting's queues where an id hashes elsewhere (from 4 to 8
 * partitions, half of each old partition's ids belong to a new one). Events
 * in flight stay until their lease ends; older instances go on reading their
 * queues meanwhile, and the moves are fenced (src/redis/partition-moves.ts),
 * so nothing is claimed twice or lost.
 */
export class Repartitioner implements BackgroundService {
  private minesScannedAt = 0;
  /**
   * Its sweeps run from a timer, not as a suspended loop: every handled type
   * has one, and between sweeps (a minute) it holds a timer alone, not a
   * generator and an abort signal with its listeners.
   */
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private stopped = false;
  private first = true;
  private failures: OutageBackoff | undefined;

  constructor(
    private readonly route: EventRoute,
    private readonly moves: PartitionMoves,
    private readonly metrics: Metrics,
    private readonly ready: () => Promise<void> | undefined,
    private readonly onMoved: (count: number) => void = () => undefined,
    /** Told when this setting's queues may claim again after waiting for a move's limits (src/redis/move-pause.ts). */
    private readonly onResumed: () => void = () => undefined,
    /** Whether a handler of the type here has flow limits. */
    private readonly hasLimits: () => boolean = () => false,
  ) {}

  /** Whether this setting's queues wait for the queues moved from (their calls, their rate windows). */
  private waiting = false;

  start(): void {
    if (!this.timer && !this.sweeping) this.sweepIn(0);
  }

  /** Resolves once the move step under way is done: none is left half-way by this instance, and nothing follows it. */
  stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    return this.sweeping ?? Promise.resolve();
  }

  /** One sweep; resolves whether anything is still to move (so the next comes soon). */
  async sweep(first: boolean): Promise<boolean> {
    const { type, partitions } = this.route;
    const settings = await this.moves.settings(type);
    const all = settings.all;
    let current = settings.current;
    const now = Date.now();
    // The setting that started last is current. A type never partitioned writes nothing (no layout hash):
    // with nothing recorded, its instances move only what the probe finds.
    if (first && (partitions > 1 || current !== undefined)) {
      await this.moves.claimCurrent(type, partitions);
      current = partitions;
    }
    // With limits, even an unpartitioned setting says so: another setting started later must know to pause it.
    await this.moves.announce(type, partitions, this.hasLimits());
    if (current !== undefined && current !== partitions) {
      // Only the instances of the setting that started last move events, so two settings never move them back
      // and forth; when no instance of it has been heard of for a while (a canary stopped), this one takes over.
      const heard = all.find((s) => s.partitions === current);
      if (heard && now - heard.at < CURRENT_STALE_MS) return false;
      await this.moves.claimCurrent(type, partitions);
    }
    const mine = this.moves.queuesOf(type, partitions);
    const mineSet = new Set(mine);
    const others = all.filter((s) => s.partitions !== partitions);
    await this.holdLimits(
      mine,
      others.flatMap((s) => this.moves.queuesOf(type, s.partitions)).filter((q) => !mineSet.has(q)),
    );
    let moved = 0;
    let busy = false;
    // Events stored before settings were announced (0.4): whatever their setting, found by the probe.
    const probed = first ? await this.moves.queuesInUse(type, partitions) : [];
    const misplacedHere = probed.some((q) => !mineSet.has(q));
    const sources = new Set([...probed, ...others.flatMap((s) => this.moves.queuesOf(type, s.partitions))]);
    const emptied = new Set<TypeKeys>();
    for (const queue of sources) {
      if (mineSet.has(queue) || this.stopped) continue;
      if (await this.moves.holdsAny(queue)) moved += (await this.moves.moveOut(queue, this.route)).moved;
      if (await this.moves.holdsAny(queue)) busy = true;
      else emptied.add(queue);
    }
    // Schedules live in {type} (1 partition) or {type#0} (more): before settings were announced, both are looked at.
    for (const setting of new Set([...others.map((s) => s.partitions), ...(misplacedHere ? [1, 2] : [])])) {
      if (!this.stopped) moved += await this.moves.moveSchedules(setting, this.route);
    }
    // A queue of this setting holds ids another setting hashes elsewhere only if that one writes to it
    // (partition p < N) and does not split ours (N a multiple of ours): 4 -> 8 does, 8 -> 4 and 1 -> 8 do not.
    // Scanned then, at most every MINE_SCAN_MS; otherwise only what a crashed sweep left on its way is sent on.
    const splits = (s: { partitions: number }, p: number) => partitions > 1 && s.partitions > 1 && p < s.partitions && s.partitions % partitions !== 0;
    const stale = others.filter((s) => now - s.at >= SETTING_STALE_MS);
    const scanMine = (first && misplacedHere) || now - this.minesScannedAt >= MINE_SCAN_MS;
    let leftMine = 0;
    for (const [p, queue] of mine.entries()) {
      if (this.stopped) break;
      if (scanMine && ((first && misplacedHere) || others.some((s) => splits(s, p)))) {
        const result = await this.moves.moveOut(queue, this.route);
        moved += result.moved;
        leftMine += result.left;
      } else {
        moved += await this.moves.finishMoves(queue, this.route);
      }
    }
    if (scanMine) this.minesScannedAt = now;
    // A setting no instance announced for a while is forgotten once its queues are empty and, where it split
    // this setting's, a last scan of them found no id of another partition (nothing moved, nothing in flight).
    const gone = stale.filter((s) => this.moves.queuesOf(type, s.partitions).every((q) => mineSet.has(q) || emptied.has(q)) && (!mine.some((_, p) => splits(s, p)) || (moved === 0 && leftMine === 0)));
    await this.moves.forgetSettings(
      type,
      gone.map((s) => s.partitions),
    );
    if (moved > 0) {
      this.metrics.count(METRIC.repartitioned, { type }, moved);
      this.onMoved(moved);
    }
    return busy || moved > 0 || others.length > gone.length;
  }

  /**
   * Flow limits across the move (src/redis/move-pause.ts): while another
   * setting is in use, its queues are paused, and this setting's wait until
   * they run no call and their rate windows are over.
   */
  private async holdLimits(mine: readonly TypeKeys[], old: readonly TypeKeys[]): Promise<void> {
    if (old.length === 0 && !this.waiting) return;
    const from = old.length > 0 ? await this.moves.pauseOld(old) : 0;
    const waiting = await this.moves.waitUntil(mine, from);
    if (this.waiting && !waiting) this.onResumed();
    this.waiting = waiting;
  }

  private sweepIn(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const sweeping = this.tick().finally(() => {
        if (this.sweeping === sweeping) this.sweeping = undefined;
      });
      this.sweeping = sweeping;
    }, ms);
  }

  /** One sweep, then the next one's timer: soon while events are to move, after a backoff when Redis failed. */
  private async tick(): Promise<void> {
    let nextInMs: number;
    try {
      // Not before the connection is ready: it keeps no offline queue, and a sweep sent early would fail.
      await this.ready();
      if (this.stopped) return;
      const busy = await this.sweep(this.first);
      this.first = false;
      this.failures = undefined;
      nextInMs = busy ? BUSY_SWEEP_MS : IDLE_SWEEP_MS;
    } catch {
      if (this.stopped) return;
      this.metrics.count(METRIC.redisErrors, { loop: 'repartition', type: this.route.type });
      this.failures ??= new OutageBackoff();
      nextInMs = this.failures.next();
    }
    this.sweepIn(nextInMs);
  }
}
