import 'reflect-metadata';
import { Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import type { DelayedEventServiceOptions, Delivery, HandlerOptions } from '../../src';
import { built } from '../built-package';
import { type BenchQueue, type BenchQueueFactory, PAYLOAD_S, chunks } from './bench-queue';

const { DelayedEvent, DelayedEventService } = built;

@DelayedEvent('bench.event')
class BenchEvent {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
    readonly s: string = '',
  ) {}
}

/** This service with `options` (and its handlers with `handlerOptions`) beside its defaults (ours: the defaults alone). */
/** `inCall`: what each handler call does besides (progress, log lines, a result: benchmarks/running-work.ts). */
export function oursWith(options: Partial<DelayedEventServiceOptions>, library = 'ours', handlerOptions: HandlerOptions = {}, inCall?: (delivery: Delivery, n: number) => void): BenchQueueFactory {
  return {
    library,
    create: (port, queueName) => createOurs(port, queueName, options, handlerOptions, inCall),
  };
}

export const ours: BenchQueueFactory = oursWith({});

async function createOurs(
  port: number,
  queueName: string,
  options: Partial<DelayedEventServiceOptions>,
  handlerOptions: HandlerOptions,
  inCall: ((delivery: Delivery, n: number) => void) | undefined,
): Promise<BenchQueue> {
  const service = new DelayedEventService({ redis: `redis://127.0.0.1:${port}`, prefix: queueName, ...options });
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
    prepareWorker: async (parallelism, onStart) => {
      // Connected and its scripts loaded; a handler's own reading connections open as it starts, as BullMQ's and Bee-Queue's workers start reading.
      await service.waitUntilReady();
      return () =>
        service.addHandler(
          BenchEvent,
          async (e, _context, delivery) => {
            onStart(e.n);
            inCall?.(delivery, e.n);
          },
          parallelism,
          handlerOptions,
        );
    },
    startWorker: async (parallelism, onStart) => (await queue.prepareWorker(parallelism, onStart))(),
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
}
