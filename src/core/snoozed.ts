import type { DelayedEventInstance } from './delayed-event.decorator';
import { type Delay, delayToMillis } from './duration';
import { InvalidArgumentError } from './errors';
import { checkArgumentKeys } from './option-keys';

/** What a snooze may say beside its delay. */
export interface SnoozeOptions {
  /**
   * The event as it should be delivered next (same class and id): its
   * payload replaces the stored one, as BullMQ's `updateData`. Refused on a
   * type with more than one subscriber group.
   */
  readonly event?: DelayedEventInstance;
}

const SNOOZE_OPTION_KEYS = { event: true } as const;
const SNOOZED = Symbol.for('reactive-delayed-events:snoozed');

/**
 * A handler's answer (since 0.6): "not yet, ask me again after `delay`",
 * as in polling a provider until a payment settles. Return it
 * (`return delivery.snooze(delay)`) or throw it (`throw new Snoozed(delay)`):
 * the delivery goes back to SCHEDULED and comes again after `delay`, fenced
 * to this delivery, without spending an attempt (the next delivery has the
 * same `delivery.attempt`). Past the handler's `maxSnoozes` the event is
 * dead-lettered with reason `snoozes-exhausted`. A bad delay or option throws
 * here, an `InvalidDelayError` or `InvalidArgumentError`, which fails the call.
 */
export class Snoozed extends Error {
  /** The delay, in whole milliseconds. */
  readonly delayMs: number;
  readonly event: DelayedEventInstance | undefined;

  constructor(delay: Delay, options: SnoozeOptions = {}) {
    const ms = delayToMillis(delay);
    checkArgumentKeys(options, SNOOZE_OPTION_KEYS, 'snooze');
    const event = options?.event;
    if (event !== undefined && (event === null || typeof event !== 'object')) {
      throw new InvalidArgumentError('snooze event', `must be an instance of the event's class, got ${event === null ? 'null' : typeof event}`);
    }
    super(`snoozed for ${ms} ms`);
    this.name = 'Snoozed';
    this.delayMs = ms;
    this.event = event;
  }

  /** Whether `value` is a Snoozed (from any copy of the package). Never throws. */
  static is(value: unknown): value is Snoozed {
    try {
      // Instances carry the mark on their prototype (no self-reference: see PermanentFailure.is).
      return typeof value === 'object' && value !== null && (value as { [SNOOZED]?: unknown })[SNOOZED] === true;
    } catch {
      // A value that throws when looked at (a hostile Proxy) is no Snoozed.
      return false;
    }
  }
}
Object.defineProperty(Snoozed.prototype, SNOOZED, { value: true });
