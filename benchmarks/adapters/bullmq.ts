import { Queue, Worker } from 'bullmq';
import { type BenchQueue, type BenchQueueFactory, PAYLOAD_S, chunks } from './bench-queue';

/**
 * BullMQ with its documented settings for this job: finished jobs removed by the
 * Worker (removeOnComplete/removeOnFail on the Worker, as BullMQ's guide shows;
 * in defaultJobOptions they would be copied into every job's opts and double
 * its memory).
 */
export const bullmq: BenchQueueFactory = {
  library: 'bullmq',
  async create(port, queueName) {
    const connection = { host: '127.0.0.1', port };
    const queue = new Queue(queueName, { connection });
    await queue.waitUntilReady();
    let worker: Worker | undefined;
    const bench: BenchQueue = {
      library: 'bullmq',
      add: async (n, delayMs) => {
        await queue.add('e', { n, s: PAYLOAD_S }, { delay: delayMs });
      },
      addBulk: async (ns, delayMs) => {
        for (const chunk of chunks(ns)) await queue.addBulk(chunk.map((n) => ({ name: 'e', data: { n, s: PAYLOAD_S }, opts: { delay: delayMs } })));
      },
      prepareWorker: async (parallelism, onStart) => {
        const w = new Worker(
          queueName,
          async (job) => {
            onStart((job.data as { n: number }).n);
          },
          { connection, concurrency: parallelism, removeOnComplete: { count: 0 }, removeOnFail: { count: 0 }, autorun: false },
        );
        worker = w;
        await w.waitUntilReady();
        return () => void w.run();
      },
      startWorker: async (parallelism, onStart) => (await bench.prepareWorker(parallelism, onStart))(),
      pending: async () => {
        const counts = await queue.getJobCounts('delayed', 'wait', 'active', 'prioritized');
        return Object.values(counts).reduce((a, b) => a + b, 0);
      },
      close: async () => {
        await worker?.close();
        await queue.close();
      },
    };
    return bench;
  },
};
