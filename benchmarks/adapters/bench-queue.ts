/** What every library under test offers the scenarios: the same calls, the same payload. */
export interface BenchQueue {
  readonly library: string;
  /** Adds one event due after `delayMs`; resolves when the library says it is stored. */
  add(n: number, delayMs: number): Promise<void>;
  /** Adds many events with the library's batch API, 1,000 per call. */
  addBulk(ns: readonly number[], delayMs: number): Promise<void>;
  /**
   * Constructs and connects handlers (an async no-op that reports the event's
   * number as it starts) without letting them take anything; the function it
   * resolves to lets them start. Timed scenarios start the clock between the two.
   */
  prepareWorker(parallelism: number, onStart: (n: number) => void): Promise<() => void>;
  /** prepareWorker, then start. */
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
