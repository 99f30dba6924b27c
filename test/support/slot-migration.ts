import { Redis } from 'ioredis';
import type { RedisCluster } from './redis-cluster';

/**
 * Moves one hash slot to another master the way `redis-cli --cluster reshard`
 * does, in steps a test can interleave with its own calls: both ends mark the
 * slot (IMPORTING, MIGRATING), keys go over with MIGRATE, then every master
 * learns the new owner (SETSLOT NODE).
 */
export class SlotMigration {
  private constructor(
    readonly slot: number,
    /** The master giving the slot away. */
    readonly source: Redis,
    /** The master taking it. */
    readonly target: Redis,
    private readonly targetPort: number,
    private readonly targetId: string,
    /** Every master's port, the target first and the source second: the order in which they learn the new owner. */
    private readonly masters: readonly number[],
  ) {}

  /** Opens the migration of `key`'s slot, to another master. */
  static async begin(cluster: RedisCluster, key: string): Promise<SlotMigration> {
    const any = await anyLiveNode(cluster);
    try {
      const slot = Number(await any.cluster('KEYSLOT', key));
      const ranges = await any.cluster('SLOTS');
      const sourcePort = ranges.find(([from, to]) => slot >= from && slot <= to)![2]![1];
      const masters = [...new Set(ranges.map((range) => range[2]![1]))];
      const targetPort = masters.find((port) => port !== sourcePort)!;
      const source = new Redis(sourcePort, '127.0.0.1');
      const target = new Redis(targetPort, '127.0.0.1');
      const sourceId = String(await source.cluster('MYID'));
      const targetId = String(await target.cluster('MYID'));
      // Importing first: once the source says MIGRATING, clients are sent to the target, which must accept them.
      await target.cluster('SETSLOT', slot, 'IMPORTING', sourceId);
      await source.cluster('SETSLOT', slot, 'MIGRATING', targetId);
      const others = masters.filter((port) => port !== sourcePort && port !== targetPort);
      return new SlotMigration(slot, source, target, targetPort, targetId, [targetPort, sourcePort, ...others]);
    } finally {
      any.disconnect();
    }
  }

  /** Keys of the slot still on the source. */
  async keysLeft(): Promise<string[]> {
    return (await this.source.cluster('GETKEYSINSLOT', this.slot, 100_000)) as string[];
  }

  async move(keys: readonly string[]): Promise<void> {
    if (keys.length > 0) await this.source.migrate('127.0.0.1', this.targetPort, '', 0, 10_000, 'KEYS', ...keys);
  }

  /** Moves what is left, `pauseMs` between keys, then hands the slot to the target on every master. */
  async finish(pauseMs = 0): Promise<void> {
    for (let keys = await this.keysLeft(); keys.length > 0; keys = await this.keysLeft()) {
      await this.move(pauseMs > 0 ? keys.slice(0, 1) : keys);
      if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
    // The target first, as redis-cli does: the slot must never be without an owner that accepts it.
    for (const port of this.masters) {
      const master = new Redis(port, '127.0.0.1');
      try {
        await master.cluster('SETSLOT', this.slot, 'NODE', this.targetId);
      } finally {
        master.disconnect();
      }
    }
    this.source.disconnect();
    this.target.disconnect();
  }
}

/** A node that answers: an earlier test may have killed some. */
async function anyLiveNode(cluster: RedisCluster): Promise<Redis> {
  for (const node of cluster.nodes) {
    const client = new Redis(node.port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => null });
    try {
      await client.connect();
      return client;
    } catch {
      client.disconnect();
    }
  }
  throw new Error('no cluster node answers');
}
