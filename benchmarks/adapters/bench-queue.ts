/** What every library under test offers the scenarios: the same calls, the same payload. */
export interface BenchQueue {
  readonly library: string;
  /** Adds one event due after `delayMs`; resolves when the library says it is stored. */
  add(n: number, delayMs: number): Promise<void>;
  /** Adds many events with the library's batch API, 1,000 per call. */
  addBulk(ns: readonly number[], delayMs: number): Promise<void>;
  /** Starts handlers: a no-op that reports the event's number and start time. */
  startWorker(parallelism: number, onStart: (n: number) => void): Promise<void>;
  /** Events stored and not yet handled successfully. */
  pending(): Promise<number>;
  close(): Promise<void>;
}

export interface BenchQueueFactory {
  readonly library: string;
  create(redisPort: number, queueName: string): Promise<BenchQueue>;
}

export const PAYLOAD_S = 'x'.repeat(20);
export const BULK_CHUNK = 1_000;

export function chunks<T>(items: readonly T[], size = BULK_CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
