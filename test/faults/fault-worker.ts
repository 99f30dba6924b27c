/**
 * A service instance in its own process for the fault suite. Reports JSON
 * lines on stdout (synchronous on Linux pipes, so nothing is lost on SIGKILL).
 *   ROLE=consumer  handles FaultEvent: {start}, then {ok} when the handler returns true
 *   ROLE=producer  enqueues COUNT events spread over SPREAD_MS: {accepted, status, resent} once Redis
 *                  answered for each; PACED=1 sends each at its due time with no delay, instead of all at once
 *   ROLE=mutator   stores COUNT ids at version 1, due over SPREAD_MS, and meanwhile MUTATIONS times
 *                  stores a random id again at the next version, due at once, and again while that
 *                  one likely runs (each a replace, or a cancel then an enqueue):
 *                  {stored, v, status} once Redis answered; {mutated} at the end
 *   GROUP          the consumer's subscriber group (default: the default group); its lines carry it
 *   REDIS_URL, PREFIX; HANDLER_MS (consumer work per event), PARALLELISM, COMMAND_TIMEOUT_MS
 *   FAIL_FIRST     the share (0..1) of first attempts a consumer fails (returns false): {failed}
 */
import 'reflect-metadata';
import { DelayedEvent, DelayedEventService } from '../../src';

@DelayedEvent('fault.event')
export class FaultEvent {
  constructor(
    readonly id: string = '',
    /** Which payload this is, for the mutator's scenario: every replace stores the next. */
    readonly v: number = 0,
  ) {}
}

const say = (line: object) => process.stdout.write(`${JSON.stringify({ ...line, pid: process.pid, at: Date.now() })}\n`);
// A worker that dies of its own error says why first, so a test can tell that from a kill.
for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(event, (error: unknown) => {
    say({ crashed: `${event}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}` });
    process.exit(70);
  });
}
const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

const service = new DelayedEventService({
  redis: process.env.REDIS_URL!,
  prefix: process.env.PREFIX!,
  pollIntervalMs: 200,
  handlerTimeoutMs: env('HANDLER_TIMEOUT_MS', 2_000),
  leaseGraceMs: env('LEASE_GRACE_MS', 1_000),
  readerBlockMs: 1_000,
  watchdogGraceMs: 1_000,
  commandTimeoutMs: env('COMMAND_TIMEOUT_MS', 10_000),
  idempotencyWindowMs: env('IDEMPOTENCY_WINDOW_MS', 300_000),
});

async function produce(): Promise<void> {
  const count = env('COUNT', 1_000);
  const spread = env('SPREAD_MS', 1_000);
  const started = Date.now();
  const inFlight = new Set<Promise<void>>();
  for (let n = 0; n < count; n++) {
    const id = `${process.env.ID_PREFIX ?? 'e'}${n}`;
    const dueAt = started + Math.floor((n / count) * spread);
    // An enqueue that fails (Redis down, a reply lost) may or may not have been stored: the
    // producer sends it again until Redis answers, as the README says an application may.
    const attempt = async (): Promise<void> => {
      for (let resent = false; ; resent = true) {
        try {
          const status = await service.enqueue(new FaultEvent(id), Math.max(0, dueAt - Date.now()));
          say({ accepted: id, status, resent });
          return;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    };
    if (process.env.PACED === '1' && dueAt > Date.now()) await new Promise((resolve) => setTimeout(resolve, dueAt - Date.now()));
    const p = attempt().finally(() => inFlight.delete(p));
    inFlight.add(p);
    if (inFlight.size >= 64) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  say({ produced: count });
  await service.close();
}

/** Stores, through every failure, version `v` of `id` due in `delayMs`: replacing, or cancelling first. */
async function store(id: string, v: number, delayMs: number, how: 'new' | 'replace' | 'cancel'): Promise<void> {
  for (;;) {
    try {
      if (how === 'cancel') await service.cancel(FaultEvent, id);
      const status = await service.enqueue(new FaultEvent(id, v), delayMs, how === 'replace' ? { replace: true } : {});
      say({ stored: id, v, status });
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

async function mutate(): Promise<void> {
  const count = env('COUNT', 1_000);
  const spread = env('SPREAD_MS', 10_000);
  const mutations = env('MUTATIONS', count);
  const versions = new Map<string, number>();
  const started = Date.now();
  for (let n = 0; n < count; n++) {
    const id = `m${n}`;
    versions.set(id, 1);
    await store(id, 1, Math.floor((n / count) * spread), 'new');
  }
  // Paced over the spread, so changes meet events scheduled, ready and running.
  for (let m = 0; m < mutations; m++) {
    const at = started + Math.floor((m / mutations) * spread);
    if (at > Date.now()) await new Promise((resolve) => setTimeout(resolve, at - Date.now()));
    const id = `m${Math.floor(Math.random() * count)}`;
    const v = versions.get(id)! + 1;
    versions.set(id, v + 1);
    await store(id, v, 0, Math.random() < 0.7 ? 'replace' : 'cancel');
    // Again while the first change is likely claimed and running: the call on it goes on with an old payload.
    await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 40));
    await store(id, v + 1, 0, Math.random() < 0.7 ? 'replace' : 'cancel');
  }
  say({ mutated: mutations });
  await service.close();
}

function consume(): void {
  const work = env('HANDLER_MS', 0);
  const group = process.env.GROUP;
  service.addHandler(
    FaultEvent,
    async (event, _context, delivery) => {
      say({ start: event.id, attempt: delivery.attempt, enq: delivery.enqueuedAt, group, v: event.v });
      if (work > 0) await new Promise((resolve) => setTimeout(resolve, work));
      if (delivery.attempt === 1 && Math.random() < env('FAIL_FIRST', 0)) {
        say({ failed: event.id, attempt: delivery.attempt, group, v: event.v });
        return false;
      }
      say({ ok: event.id, attempt: delivery.attempt, enq: delivery.enqueuedAt, group, v: event.v });
      return true;
    },
    env('PARALLELISM', 16),
    { group },
  );
  say({ ready: true });
  process.once('SIGTERM', () => {
    void service.close().then(() => {
      say({ closed: true });
      process.exit(0);
    });
  });
}

if (process.env.ROLE === 'producer') void produce();
else if (process.env.ROLE === 'mutator') void mutate();
else consume();
