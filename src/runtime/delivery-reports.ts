import { InvalidArgumentError, SerializationError, describe } from '../core/errors';
import type { TypeKeys } from '../redis/redis-layout';
import type { ChildResult } from '../redis/flow-store';

// What a handler reports while it runs (since 0.6): delivery.progress, delivery.log and delivery.result.

/** The call a report belongs to: its claim, in its queue. */
export interface ReportedCall {
  readonly id: string;
  readonly claim: number;
  readonly keys: TypeKeys;
}

/** Where a delivery's reports go (src/runtime/call-reports.ts). */
export interface DeliveryReports {
  progress(call: ReportedCall, attempt: number, json: string): void;
  log(call: ReportedCall, attempt: number, line: string): void;
  /** A flow parent's children's results (since 0.6), keyed '"type|id"'. */
  childResults(call: ReportedCall): Promise<Readonly<Record<string, ChildResult>>>;
}

/** Largest progress value (bytes of JSON), log line (bytes; longer ones are cut) and result (bytes of JSON). */
export const MAX_PROGRESS_BYTES = 4 * 1024;
export const MAX_LOG_LINE_BYTES = 1024;
export const MAX_RESULT_BYTES = 64 * 1024;

/** `value` as JSON, or the error a handler should get at once: not JSON, or over `most` bytes. */
export function jsonOf(value: unknown, type: string, what: string, name: string, most: number): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new SerializationError(type, error, what);
  }
  if (json === undefined) throw new SerializationError(type, `${describe(value)} has no JSON form`, what);
  const bytes = Buffer.byteLength(json);
  if (bytes > most) throw new InvalidArgumentError(name, `is ${bytes} bytes as JSON; at most ${most} are kept: report less, or store it elsewhere and report a reference`);
  return json;
}

/** `text` cut to at most `most` bytes of UTF-8, never inside a character; a cut one ends with '…'. */
export function cutToBytes(text: string, most: number): string {
  if (Buffer.byteLength(text) <= most) return text;
  let cut = Buffer.from(text)
    .subarray(0, most - 3)
    .toString();
  // A character split at the end decodes as U+FFFD: drop it.
  if (cut.endsWith('\uFFFD')) cut = cut.slice(0, -1);
  return `${cut}…`;
}
