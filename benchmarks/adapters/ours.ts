import 'reflect-metadata';
import { Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import { DelayedEvent, DelayedEventService } from '../../src';
import { type BenchQueue, type BenchQueueFactory, PAYLOAD_S, chunks } from './bench-queue';

@DelayedEvent('bench.event')
class BenchEvent {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
    readonly s: string = '',
  ) {}
}

export const ours: BenchQueueFactory = {
  library: 'ours',
  async create(port, queueName) {
    const service = new DelayedEventService({ redis: `redis://127.0.0.1:${port}`, prefix: queueName });
    const event = (n: number) => new BenchEvent(`${n}`, n, PAYLOAD_S);
    const observer = new Redis(port, '127.0.0.1');
    const keys = `${queueName}:{bench.event}`;
    const queue: BenchQueue = {
      library: 'ours',
      add: async (n, delayMs) => {
        await service.enqueue(event(n), delayMs);
      },
      addBulk: async (ns, delayMs) => {
        for (const chunk of chunks(ns)) await firstValueFrom(service.enqueueBatch(chunk.map((n) => ({ event: event(n), delay: delayMs }))));
      },
      startWorker: async (parallelism, onStart) => {
        service.addHandler(BenchEvent, (e) => (onStart(e.n), true), parallelism);
      },
      pending: async () => {
        // Every stored event has its envelope in the meta hash until it is completed.
        return observer.hlen(`${keys}:m`);
      },
      close: async () => {
        await service.close();
        observer.disconnect();
      },
    };
    return queue;
  },
};
