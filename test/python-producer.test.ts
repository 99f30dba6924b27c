import 'reflect-metadata';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Type } from 'class-transformer';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, type EventContext } from '../src';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/**
 * The Python producer (clients/python) with Debian's python3-redis: its own
 * pytest suite against this file's Redis (a single server, or the real
 * Cluster), and events it enqueues handled by the Node service as class instances.
 */
const ROOT = join(__dirname, '..');
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const pythonEnv = (env: Record<string, string>) => ({ ...process.env, ...env, PYTHONPATH: join(ROOT, 'clients', 'python'), PYTHONDONTWRITEBYTECODE: '1' });

function run(args: string[], env: Record<string, string>, input?: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = execFile(PYTHON, args, { cwd: ROOT, env: pythonEnv(env), timeout: 180_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) || 1 : 0, out: `${stdout}${stderr}` }),
    );
    if (input !== undefined) child.stdin!.end(input);
  });
}

type Result = { ok?: unknown; error?: string; code?: string; message?: string };
async function python(env: Record<string, string>, prefix: string, calls: Array<{ op: string; args: Record<string, unknown> }>): Promise<Result[]> {
  const { code, out } = await run([join(__dirname, 'support', 'python-producer.py')], env, JSON.stringify({ prefix, calls }));
  if (code !== 0) throw new Error(`the Python producer failed (${code}):\n${out}`);
  return JSON.parse(out.trim().split('\n').pop()!) as Result[];
}

class Customer {
  name = '';
  tags: string[] = [];
  greet(): string {
    return `hello ${this.name}`;
  }
}

@DelayedEvent('py.e2e.order')
class PyOrder {
  id = '';
  @Type(() => Customer) customer = new Customer();
  @Type(() => Date) placedAt = new Date(0);
  total = 0;
}

@DelayedEvent('py.e2e.money', { version: 2, upcast: { 1: (v) => ({ cents: Math.round((v.amount as number) * 100) }) } })
class PyMoney {
  id = '';
  cents = 0;
}

@DelayedEvent('py.e2e.parted', { partitions: 4 })
class PyParted {
  id = '';
  n = 0;
}

describe('the Python producer', () => {
  const redis = useRedis();

  it('passes its own suite (pytest) against this Redis', async () => {
    const env = redis.workerEnv();
    const { code, out } = await run(['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'clients/python/tests'], {
      ...(env.REDIS_URL ? { RDE_REDIS_URL: env.REDIS_URL } : {}),
      ...(env.REDIS_CLUSTER_NODES ? { RDE_CLUSTER_NODES: env.REDIS_CLUSTER_NODES } : {}),
    });
    expect(code, out).toBe(0);
    expect(out).toMatch(/\d+ passed/);
    // On the Cluster project its Cluster tests ran, not skipped.
    if (env.REDIS_CLUSTER_NODES) expect(out).not.toMatch(/skipped/);
  }, 200_000);

  it('enqueues events the Node service handles as class instances: nested object, Date, context, upcast version, groups', async () => {
    const prefix = redis.prefix();
    const orders: Array<{ event: PyOrder; context: EventContext; group: string }> = [];
    const money: PyMoney[] = [];
    const service = redis.service({ prefix });
    service.addHandler(PyOrder, (event, context) => (orders.push({ event, context, group: 'default' }), true), 4);
    redis.service({ prefix }).addHandler(PyOrder, (event, context) => (orders.push({ event, context, group: 'audit' }), true), 4, { group: 'audit' });
    service.addHandler(PyMoney, (event) => (money.push(event), true), 4);
    const client = redis.client();
    await waitFor(async () => (await client.hexists(`${prefix}:{py.e2e.order}:groups`, 'audit')) === 1, 'group audit registered');

    const results = await python(redis.workerEnv(), prefix, [
      {
        op: 'enqueue',
        args: {
          type_name: 'py.e2e.order',
          id: 'o-1',
          payload: { customer: { name: 'Zoë', tags: ['vip'] }, placedAt: { $date: '2026-03-04T05:06:07.089Z' }, total: 12.5 },
          delay_ms: 50,
          context: { traceId: 'trace-py' },
        },
      },
      { op: 'enqueue', args: { type_name: 'py.e2e.money', id: 'm-1', payload: { amount: 1.25 } } },
      { op: 'enqueue', args: { type_name: 'py.e2e.money', id: 'm-2', payload: { cents: 300 }, version: 2 } },
    ]);
    expect(results).toEqual([{ ok: 'scheduled' }, { ok: 'scheduled' }, { ok: 'scheduled' }]);

    await waitFor(() => orders.length === 2 && money.length === 2, 'both groups handled the order, and both money events handled');
    for (const { event, context } of orders) {
      expect(event).toBeInstanceOf(PyOrder);
      expect(event.customer).toBeInstanceOf(Customer);
      expect(event.customer.greet()).toBe('hello Zoë');
      expect(event.customer.tags).toEqual(['vip']);
      expect(event.placedAt).toBeInstanceOf(Date);
      expect(event.placedAt.toISOString()).toBe('2026-03-04T05:06:07.089Z');
      expect(event.total).toBe(12.5);
      expect(context).toEqual({ traceId: 'trace-py' });
    }
    expect(orders.map((o) => o.group).sort()).toEqual(['audit', 'default']);
    // Version 1 as Python wrote it went through upcast[1]; version 2 came as it is.
    expect(money.map((m) => [m.id, m.cents]).sort()).toEqual([
      ['m-1', 125],
      ['m-2', 300],
    ]);
  });

  it("reads a partitioned type's layout, and shares idempotency and replace with Node producers", async () => {
    const prefix = redis.prefix();
    const handled: Array<[string, number]> = [];
    const service = redis.service({ prefix });
    service.addHandler(PyParted, (event) => (handled.push([event.id, event.n]), true), 4);
    const client = redis.client();
    // The Node instance says which partitions setting is current; Python reads it from there.
    await waitFor(async () => (await client.hget(`${prefix}:{py.e2e.parted}:layout`, 'current')) === '4', 'partitions setting announced');

    const node = Object.assign(new PyParted(), { id: 'from-node', n: 1 });
    expect(await service.enqueue(node, 60_000)).toBe('scheduled');
    const results = await python(redis.workerEnv(), prefix, [
      { op: 'enqueue', args: { type_name: 'py.e2e.parted', id: 'from-node', payload: { n: 2 }, delay_ms: 60_000 } },
      { op: 'enqueue', args: { type_name: 'py.e2e.parted', id: 'from-node', payload: { n: 3 }, delay_ms: 100, replace: true } },
      { op: 'enqueue_many', args: { type_name: 'py.e2e.parted', entries: [1, 2, 3, 4, 5, 6].map((n) => ({ id: `py-${n}`, payload: { n }, delay_ms: 100 })) } },
      { op: 'enqueue', args: { type_name: 'py.e2e.parted', id: 'to-cancel', payload: { n: 9 }, delay_ms: 60_000 } },
      { op: 'cancel', args: { type_name: 'py.e2e.parted', id: 'to-cancel' } },
      { op: 'enqueue', args: { type_name: 'py.e2e.parted', id: 'later', payload: { n: 7 }, delay_ms: 3_600_000 } },
      { op: 'reschedule', args: { type_name: 'py.e2e.parted', id: 'later', delay_ms: 100 } },
    ]);
    expect(results).toEqual([
      { ok: 'duplicate' },
      { ok: 'replaced' },
      { ok: ['scheduled', 'scheduled', 'scheduled', 'scheduled', 'scheduled', 'scheduled'] },
      { ok: 'scheduled' },
      { ok: true },
      { ok: 'scheduled' },
      { ok: true },
    ]);
    await waitFor(() => handled.length === 8, 'the replaced event, six from the batch and the rescheduled one handled');
    expect(new Map(handled).get('from-node')).toBe(3);
    expect(handled.map(([id]) => id).sort()).toEqual(['from-node', 'later', 'py-1', 'py-2', 'py-3', 'py-4', 'py-5', 'py-6']);
    // The ids landed in the partitions Node computes (its own find() reads them there).
    expect(await service.find(PyParted, 'to-cancel')).toBeUndefined();
    // Handled or cancelled ids stay marked: a Node re-send is a duplicate, as a Python one is.
    expect(await service.enqueue(Object.assign(new PyParted(), { id: 'py-1', n: 0 }), 0)).toBe('duplicate');
    expect(await service.enqueue(Object.assign(new PyParted(), { id: 'to-cancel', n: 0 }), 0)).toBe('duplicate');
    const again = await python(redis.workerEnv(), prefix, [{ op: 'enqueue', args: { type_name: 'py.e2e.parted', id: 'py-2', payload: { n: 0 } } }]);
    expect(again).toEqual([{ ok: 'duplicate' }]);
  });
});
