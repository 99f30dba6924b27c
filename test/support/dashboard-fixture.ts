import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DelayedEvent, type DelayedEventService, PermanentFailure } from '../../src';
import { type DashboardOptions, createDashboard } from '../../src/dashboard';
import type { useRedis } from './harness';
import { waitFor } from './wait-for';

@DelayedEvent('dash.order')
export class OrderDue {
  constructor(
    readonly id: string = '',
    readonly note: string = '',
  ) {}
}

/** What an attacker would put in a payload or an error, hoping the dashboard renders it as markup. */
export const HOSTILE = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">`;

/**
 * A type with events in every state a page shows: 'later-N' scheduled 10 and
 * 40 minutes ahead, 'dead-N' dead-lettered (their handler refuses them, with
 * an error holding markup), 'hostile' scheduled 150 minutes ahead with a payload holding markup.
 * The worker that dead-lettered them is closed, so nothing moves afterwards.
 */
export async function seedOrders(redis: ReturnType<typeof useRedis>, prefix: string): Promise<void> {
  const worker = redis.service({ prefix });
  worker.addHandler(
    OrderDue,
    async (event) => {
      throw new PermanentFailure(`refused ${event.id}: ${HOSTILE}`);
    },
    4,
  );
  for (let i = 0; i < 3; i++) await worker.enqueue(new OrderDue(`dead-${i}`, 'x'), 0);
  await waitFor(async () => (await worker.counts(OrderDue))?.dead === 3, 'three dead letters');
  await worker.removeHandler(OrderDue);
  for (let i = 0; i < 5; i++) await worker.enqueue(new OrderDue(`later-${i}`, `order ${i}`), { minutes: 10 });
  for (let i = 5; i < 8; i++) await worker.enqueue(new OrderDue(`later-${i}`, `order ${i}`), { minutes: 40 });
  await worker.enqueue(new OrderDue('hostile', HOSTILE), { minutes: 150 }, { priority: 3 });
  await worker.close();
}

export interface ServedDashboard {
  readonly url: string;
  readonly server: Server;
  close(): Promise<void>;
}

/** The dashboard of `service` on a free loopback port, under `basePath` when given. */
export async function serveDashboard(service: DelayedEventService, options: DashboardOptions = {}): Promise<ServedDashboard> {
  const handler = createDashboard(service, options);
  const server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${options.basePath ?? ''}/`,
    server,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
