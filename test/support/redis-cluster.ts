import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { RedisServer } from './redis-server';

const run = promisify(execFile);

/** A real Redis Cluster on loopback: 3 masters and 3 replicas, each a redis-server stopped by PID. */
export class RedisCluster {
  private constructor(readonly nodes: readonly RedisServer[]) {}

  static async start(): Promise<RedisCluster> {
    const nodes = await Promise.all(
      Array.from({ length: 6 }, () => RedisServer.start(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000', '--repl-diskless-sync-delay', '0'])),
    );
    const cluster = new RedisCluster(nodes);
    try {
      await run('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '1', '--cluster-yes']);
      await cluster.waitUntilReady();
      return cluster;
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  get startupNodes(): Array<{ host: string; port: number }> {
    return this.nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  }

  /** A client for the whole cluster. */
  client(): Cluster {
    return new Cluster(this.startupNodes);
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }

  /**
   * Every node sees the cluster ok, and every replica has finished its first
   * sync: a replica that never synced refuses to take over from a dead master.
   */
  private async waitUntilReady(): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const states = await Promise.all(
        this.nodes.map(async (n) => {
          const client = new Redis(n.port, '127.0.0.1', { lazyConnect: true });
          try {
            await client.connect();
            const replication = await client.info('replication');
            const synced = /role:master/.test(replication) || /master_link_status:up/.test(replication);
            return synced && /cluster_state:ok/.test(await client.cluster('INFO'));
          } finally {
            client.disconnect();
          }
        }),
      );
      if (states.every(Boolean)) return;
      if (Date.now() > deadline) throw new Error('cluster not ok, or replicas not synced, within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
