import 'reflect-metadata';
import { Type } from 'class-transformer';
import { DelayedEvent, DelayedEventService, exponentialBackoff } from '../src';

@DelayedEvent('payment.check') // the type name stored in Redis: keep it when you rename the class
class PaymentCheck {
  @Type(() => Date) requestedAt = new Date(); // Dates and nested objects need @Type
  // Events are read back with `new PaymentCheck()`: give every parameter a default.
  constructor(
    readonly id = '', // unique within the type
    readonly amountCents = 0,
  ) {}
}

const service = new DelayedEventService({ redis: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', prefix: 'shop' });

let closing: Promise<void> | undefined;
function shutdown(): Promise<void> {
  // Stops taking events, waits for running handlers, releases the connections.
  closing ??= service.close().then(() => console.log('closed'));
  return closing;
}
process.once('SIGTERM', () => void shutdown());
process.once('SIGINT', () => void shutdown());

service.addHandler(
  PaymentCheck,
  async (event, context, delivery) => {
    console.log(`handled ${event.id}: ${event.amountCents} cents for ${context.tenant}, attempt ${delivery.attempt}`);
    // Returning nothing is a success; throw (or return false) to have it retried.
    void shutdown(); // this example stops after its one event; a real service runs until SIGTERM
  },
  8, // at most 8 calls at once in this process
  { retry: exponentialBackoff({ maxAttempts: 5, initialMs: 1_000 }) },
);

async function main(): Promise<void> {
  try {
    const status = await service.enqueue(new PaymentCheck(`order-${Date.now()}`, 1999), { seconds: 1 }, { context: { tenant: 'acme' } });
    console.log(`enqueued: ${status}`); // 'scheduled', or 'duplicate' if this id is already stored
  } catch (error) {
    // Bad input (InvalidEventError, ...) or Redis out of reach (RedisCallTimeoutError): report it, don't crash.
    console.error('could not schedule the check:', error);
    process.exitCode = 1;
    await shutdown();
  }
}

void main();
