import BeeQueue from 'bee-queue';
import { type BenchQueue, type BenchQueueFactory, PAYLOAD_S, chunks } from './bench-queue';

interface Data {
  n: number;
  s: string;
}

/**
 * Bee-Queue with its documented settings for this job: successes removed, the
 * worker activating delayed jobs, and a producer that keeps no saved job in
 * memory (storeJobs: false, its README's advice for producers).
 */
export const beeQueue: BenchQueueFactory = {
  library: 'bee-queue',
  async create(port, queueName) {
    const redis = { host: '127.0.0.1', port };
    const producer = new BeeQueue<Data>(queueName, { redis, isWorker: false, getEvents: false, storeJobs: false, removeOnSuccess: true });
    await producer.ready();
    let worker: BeeQueue<Data> | undefined;
    const job = (n: number, delayMs: number) => producer.createJob({ n, s: PAYLOAD_S }).delayUntil(Date.now() + delayMs);
    const bench: BenchQueue = {
      library: 'bee-queue',
      add: async (n, delayMs) => {
        await job(n, delayMs).save();
      },
      addBulk: async (ns, delayMs) => {
        for (const chunk of chunks(ns)) await producer.saveAll(chunk.map((n) => job(n, delayMs)));
      },
      prepareWorker: async (parallelism, onStart) => {
        const w = new BeeQueue<Data>(queueName, { redis, activateDelayedJobs: true, removeOnSuccess: true, getEvents: false });
        worker = w;
        await w.ready();
        return () =>
          w.process(parallelism, async (j) => {
            onStart(j.data.n);
          });
      },
      startWorker: async (parallelism, onStart) => (await bench.prepareWorker(parallelism, onStart))(),
      pending: async () => {
        const health = await producer.checkHealth();
        return health.waiting + health.active + health.delayed;
      },
      close: async () => {
        await worker?.close();
        await producer.close();
      },
    };
    return bench;
  },
};
