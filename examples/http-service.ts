import 'reflect-metadata';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import {
  DelayedEvent,
  DelayedEventService,
  InvalidDelayError,
  InvalidEventError,
  NotReplicatedError,
  PayloadTooLargeError,
  RedisCallTimeoutError,
  SerializationError,
  ServiceClosedError,
} from '../src';

@DelayedEvent('reminder.send')
class SendReminder {
  constructor(
    readonly id = '',
    readonly userId = '',
    readonly text = '',
  ) {}
}

const service = new DelayedEventService({ redis: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', prefix: 'reminders' });

service.addHandler(SendReminder, async (event) => {
  console.log(`reminder ${event.id} for ${event.userId}: ${event.text}`);
}, 16);

/** What an enqueue error means to the HTTP client. */
function statusFor(error: unknown): number {
  if (error instanceof InvalidEventError || error instanceof InvalidDelayError || error instanceof SerializationError) return 400;
  if (error instanceof PayloadTooLargeError) return 413;
  // Not stored, or not known to be: the client may send the same request again (same id), which is safe.
  if (error instanceof RedisCallTimeoutError || error instanceof NotReplicatedError || error instanceof ServiceClosedError) return 503;
  return 500; // Redis refused the call (OOM at maxmemory, NOAUTH, ...)
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 64 * 1024) throw new Error('body too large');
    chunks.push(chunk);
  }
  const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
}

let ready = true;

async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const reply = (status: number, body: object) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  if (req.method === 'GET' && req.url === '/ready') return void reply(ready ? 200 : 503, { ready });
  if (req.method !== 'POST' || req.url !== '/reminders') return void reply(404, { error: 'not found' });
  let input: Record<string, unknown>;
  try {
    input = await readJson(req);
  } catch {
    return void reply(400, { error: 'expected a JSON object' });
  }
  // The client picks the id: sending the same request again answers 'duplicate' and stores nothing.
  const reminder = new SendReminder(String(input.id ?? ''), String(input.userId ?? ''), String(input.text ?? ''));
  try {
    const status = await service.enqueue(reminder, Number(input.delayMs ?? 0));
    reply(status === 'duplicate' ? 200 : 202, { status });
  } catch (error) {
    reply(statusFor(error), { error: error instanceof Error ? error.message : String(error) });
  }
}

const server = createServer((req, res) => void route(req, res));
server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const address = server.address();
  console.log(`listening on http://127.0.0.1:${typeof address === 'object' && address ? address.port : ''}`);
});

process.once('SIGTERM', () => {
  ready = false; // readiness fails: the load balancer stops sending requests
  // Stop accepting connections, let requests under way finish, then close the service.
  server.close(() => {
    service.close().then(
      () => console.log('closed'),
      (error: unknown) => {
        console.error('close failed:', error);
        process.exitCode = 1;
      },
    );
  });
});
