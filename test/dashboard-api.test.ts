import 'reflect-metadata';
import { type IncomingHttpHeaders, request as httpRequest } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { DelayedEvent, InvalidOptionError, PermanentFailure } from '../src';
import { createDashboard } from '../src/dashboard';
import { HOSTILE, OrderDue, type ServedDashboard, seedOrders, serveDashboard } from './support/dashboard-fixture';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

const TYPE = 'dash.order';
const ACTION = { 'content-type': 'application/json', 'x-delayed-events-action': '1' };

describe('the dashboard HTTP API', () => {
  const redis = useRedis();
  const served: ServedDashboard[] = [];
  afterEach(async () => {
    await Promise.all(served.splice(0).map((s) => s.close()));
  });

  /** A dashboard on a prefix seeded with orders (test/support/dashboard-fixture.ts), on the service's public API only. */
  async function setUp(options: Parameters<typeof createDashboard>[1] = {}) {
    const prefix = redis.prefix();
    await seedOrders(redis, prefix);
    const service = redis.service({ prefix });
    const dashboard = await serveDashboard(service, options);
    served.push(dashboard);
    const call = async (method: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}) => {
      const response = await fetch(new URL(path, dashboard.url), {
        method,
        headers: init.headers ?? (method === 'POST' ? ACTION : {}),
        body: init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : JSON.stringify(init.body),
        redirect: 'manual',
      });
      const text = await response.text();
      let json: any;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      return { status: response.status, headers: response.headers, text, json };
    };
    return { prefix, service, dashboard, call, get: (path: string) => call('GET', path), post: (path: string, body: unknown = {}) => call('POST', path, { body }) };
  }

  const snapshot = (prefix: string) => redis.snapshot(prefix);

  it('shows every type with its counts per state', async () => {
    const { get } = await setUp();
    const overview = await get('api/overview');
    expect(overview.status).toBe(200);
    expect(overview.json.readOnly).toBe(false);
    expect(overview.json.types).toEqual([{ type: TYPE, partitions: 1, groups: [], paused: false, counts: { scheduled: 9, ready: 0, inFlight: 0, dead: 3, waiting: 0 } }]);
  });

  it("lists a flow's parent under the state 'waiting', with what it waits for (since 0.6)", async () => {
    const { get, service } = await setUp();
    await service.enqueueFlow({ event: new OrderDue('parent-1'), children: [{ event: new OrderDue('child-1'), delay: 3_600_000 }] });
    expect((await get('api/overview')).json.types[0].counts.waiting).toBe(1);
    const waiting = await get(`api/types/${TYPE}/events?state=waiting`);
    expect(waiting.status).toBe(200);
    expect(waiting.json.events.map((e: { id: string; state: string }) => [e.id, e.state])).toEqual([['parent-1', 'waiting']]);
    const one = await get(`api/types/${TYPE}/events?id=parent-1`);
    expect(one.json.events[0].waitingFor).toEqual([{ type: TYPE, id: 'child-1' }]);
  });

  it('pages events per state, finds one by id, and shows an event whole', async () => {
    const { get } = await setUp();
    const scheduled = await get(`api/types/${TYPE}/events?state=scheduled&limit=5`);
    expect(scheduled.json.events.map((e: { id: string }) => e.id)).toEqual(['later-0', 'later-1', 'later-2', 'later-3', 'later-4']);
    const next = await get(`api/types/${TYPE}/events?state=scheduled&offset=5&limit=5`);
    expect(next.json.events.map((e: { id: string }) => e.id)).toEqual(['later-5', 'later-6', 'later-7', 'hostile']);

    const dead = await get(`api/types/${TYPE}/events?state=dead`);
    expect(dead.json.events).toHaveLength(3);
    expect(dead.json.events[0].lastError).toContain('refused dead-0');

    const found = await get(`api/types/${TYPE}/events?id=later-6`);
    expect(found.json.events.map((e: { id: string }) => e.id)).toEqual(['later-6']);
    expect((await get(`api/types/${TYPE}/events?id=nope`)).json.events).toEqual([]);

    const one = await get(`api/types/${TYPE}/events/hostile`);
    expect(one.status).toBe(200);
    expect(one.json).toMatchObject({ id: 'hostile', state: 'scheduled', attempt: 0, priority: 3, event: { note: HOSTILE } });
    // Why it waits (since 0.6), beside it.
    expect(one.json.explanation).toMatchObject({ gate: 'not-due', groups: [{ group: 'default', gate: 'not-due' }] });
    expect(new Date(one.json.dueAt).getTime()).toBeGreaterThan(Date.now() + 140 * 60_000);

    const missing = await get(`api/types/${TYPE}/events/nope`);
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe('not-found');
  });

  it('shows what falls due over the coming hour, and what the fleet did', async () => {
    const { get } = await setUp();
    const timeline = await get(`api/types/${TYPE}/timeline?horizon=1h&slots=4`);
    expect(timeline.status).toBe(200);
    expect(timeline.json.slots.map((s: { count: number }) => s.count)).toEqual([5, 0, 3, 0]);
    expect(timeline.json.overdue).toBe(0);
    const wide = await get(`api/types/${TYPE}/timeline?horizon=3h&slots=3`);
    expect(wide.json.slots.map((s: { count: number }) => s.count)).toEqual([8, 0, 1]);

    // The seeding worker wrote its counts when it closed.
    const activity = await get(`api/types/${TYPE}/activity?window=15m`);
    const sum = (field: string) => activity.json.slots.reduce((n: number, s: Record<string, number>) => n + s[field]!, 0);
    expect(sum('enqueued')).toBe(12);
    expect(sum('failed')).toBe(3);
    expect(sum('deadLettered')).toBe(3);
    expect(sum('handled')).toBe(0);
    expect(activity.json.slots.some((s: { latenessP99Ms?: number }) => typeof s.latenessP99Ms === 'number')).toBe(true);
  });

  it('reschedules, runs now, cancels, pauses and resumes through the inspection API', async () => {
    const { post, get, service } = await setUp();
    expect((await post(`api/types/${TYPE}/events/later-0/reschedule`, { delay: '3h' })).status).toBe(200);
    const moved = await service.find(TYPE, 'later-0');
    expect(moved!.dueAt.getTime()).toBeGreaterThan(Date.now() + 170 * 60_000);

    expect((await post(`api/types/${TYPE}/events/later-1/run-now`)).status).toBe(200);
    expect((await service.find(TYPE, 'later-1'))!.dueAt.getTime()).toBeLessThanOrEqual(Date.now());

    expect((await post(`api/types/${TYPE}/events/later-2/cancel`)).status).toBe(200);
    expect(await service.find(TYPE, 'later-2')).toBeUndefined();
    const again = await post(`api/types/${TYPE}/events/later-2/cancel`);
    expect(again.status).toBe(409);

    expect((await post(`api/types/${TYPE}/pause`)).status).toBe(200);
    expect(await service.isPaused(TYPE)).toBe(true);
    expect((await get('api/overview')).json.types[0].paused).toBe(true);
    expect((await post(`api/types/${TYPE}/resume`)).status).toBe(200);
    expect(await service.isPaused(TYPE)).toBe(false);
  });

  it('replays and purges dead letters: some by id, or all', async () => {
    const { post, service } = await setUp();
    const replayed = await post(`api/types/${TYPE}/dead-letters/replay`, { ids: ['dead-0'] });
    expect(replayed.json).toEqual({ count: 1 });
    const back = (await service.find(TYPE, 'dead-0'))!;
    expect(back.state).toBe('scheduled');
    expect(back.dueAt.getTime()).toBeLessThanOrEqual(Date.now());
    const purged = await post(`api/types/${TYPE}/dead-letters/purge`, { ids: ['dead-1'] });
    expect(purged.json).toEqual({ count: 1 });
    expect(await service.find(TYPE, 'dead-1')).toBeUndefined();
    expect((await post(`api/types/${TYPE}/dead-letters/replay`, { all: true })).json).toEqual({ count: 1 });
    expect((await service.counts(TYPE))!.dead).toBe(0);
  });

  it('drains, cleans old dead letters and obliterates a type (since 0.6); obliterate answers 409 while an instance handles the type', async () => {
    const { post, service, prefix } = await setUp();
    expect((await post(`api/types/${TYPE}/clean`, {})).json.error.code).toBe('bad-olderThan');
    expect((await post(`api/types/${TYPE}/clean`, { olderThan: '' })).status).toBe(400);
    expect((await post(`api/types/${TYPE}/clean`, { olderThan: '1h' })).json).toEqual({ count: 0 });
    expect((await post(`api/types/${TYPE}/clean`, { olderThan: '0', limit: 2 })).json).toEqual({ count: 2 });
    expect((await service.counts(TYPE))!.dead).toBe(1);
    expect((await post(`api/types/${TYPE}/drain`, { group: 'no spaces' })).status).toBe(400);
    expect((await post(`api/types/${TYPE}/drain`)).json).toEqual({ count: 9 });
    expect(await service.counts(TYPE)).toMatchObject({ scheduled: 0, dead: 1 });

    const worker = redis.service({ prefix });
    worker.addHandler(OrderDue, () => undefined);
    // Once it answers instances(): an instance whose subscription is not up yet cannot say it handles the type.
    await waitFor(async () => (await service.instances()).some((i) => i.handlers.some((h) => h.type === TYPE)), 'the worker answering instances()');
    const refused = await post(`api/types/${TYPE}/obliterate`);
    expect(refused.status).toBe(409);
    expect(refused.json.error).toMatchObject({ code: 'type-in-use', message: expect.stringMatching(/force/) });
    expect((await service.counts(TYPE))!.dead).toBe(1);
    expect((await post(`api/types/${TYPE}/obliterate`, { force: true })).json).toEqual({ obliterated: true });
    expect(await service.counts(TYPE)).toBeUndefined();
  });

  it("acts on a group's dead letter without being told its group, answers 409 when nothing was done, and lists every schedule and the live instances", async () => {
    const { post, get, service } = await setUp();
    service.addHandler(
      OrderDue,
      () => {
        throw new PermanentFailure('billing refused it');
      },
      1,
      { group: 'billing' },
    );
    await service.enqueue(new OrderDue('billed', 'x'), 0);
    await waitFor(async () => (await service.deadLetters(OrderDue, { group: 'billing' })).some((l) => l.id === 'billed'), 'dead in billing');
    const replayed = await post(`api/types/${TYPE}/dead-letters/replay`, { ids: ['billed'] });
    expect(replayed.status).toBe(200);
    expect(replayed.json).toMatchObject({ count: 1, groups: { billing: 1 } });
    await waitFor(async () => (await service.deadLetters(OrderDue, { group: 'billing' })).some((l) => l.id === 'billed'), 'dead again in billing');
    await service.removeHandler(OrderDue, 'billing');
    const purged = await post(`api/types/${TYPE}/dead-letters/purge`, { ids: ['billed'] });
    expect(purged.json).toMatchObject({ count: 1 });
    // Nothing left to do: not a success.
    const nothing = await post(`api/types/${TYPE}/dead-letters/replay`, { ids: ['billed'] });
    expect(nothing.status).toBe(409);
    expect(nothing.json.error.code).toBe('not-changed');

    await service.schedule('nightly', new OrderDue('', 'n'), { cron: '0 3 * * *', tz: 'UTC' });
    const schedules = await get('api/schedules');
    expect(schedules.json.schedules).toEqual([expect.objectContaining({ type: TYPE, name: 'nightly', spec: { cron: '0 3 * * *', tz: 'UTC' }, paused: false, skipped: 0, overlap: 'allow' })]);
    // One schedule paused and resumed (since 0.6), its type not.
    expect((await post(`api/types/${TYPE}/schedules/nightly/pause`)).status).toBe(200);
    expect((await get('api/schedules')).json.schedules[0]).toMatchObject({ paused: true, pausedReason: 'paused' });
    expect(await service.isPaused(OrderDue)).toBe(false);
    expect((await post(`api/types/${TYPE}/schedules/nightly/resume`)).status).toBe(200);
    expect((await service.schedules(OrderDue))[0]!.paused).toBe(false);
    expect((await post(`api/types/${TYPE}/schedules/no-such/pause`)).status).toBe(409);
    service.addHandler(OrderDue, () => true, 2);
    const instances = await get('api/instances');
    expect(instances.json.instances).toEqual([expect.objectContaining({ pid: process.pid, handlers: [expect.objectContaining({ type: TYPE, group: 'default', parallelism: 2 })] })]);
  });

  it('knows a type that only has a recurring schedule', async () => {
    const { get, service } = await setUp();
    @DelayedEvent('dash.report')
    class Report {
      constructor(readonly id: string = '') {}
    }
    await service.schedule('weekly', new Report(''), { cron: '0 9 * * 1-5', tz: 'Europe/Paris' });
    const overview = await get('api/overview');
    expect(overview.json.types.find((t: { type: string }) => t.type === 'dash.report')).toMatchObject({ type: 'dash.report', schedules: 1 });
    const own = await get('api/types/dash.report/schedules');
    expect(own.status).toBe(200);
    expect(own.json.schedules.map((s: { name: string }) => s.name)).toEqual(['weekly']);
  });

  it('answers bad input with a 400 that says what to fix, and changes nothing', async () => {
    const { post, get, prefix } = await setUp();
    const before = await snapshot(prefix);
    const cases: Array<[Promise<{ status: number; json: any }>, string]> = [
      [get('api/types/no.such.type/events'), 'unknown-type'],
      [post('api/types/no.such.type/pause'), 'unknown-type'],
      [get(`api/types/${encodeURIComponent('{bad}')}/events`), 'bad-argument'],
      [get(`api/types/${TYPE}/events?state=sleeping`), 'bad-state'],
      [get(`api/types/${TYPE}/events/%E0%A4%A`), 'bad-path'],
      [get(`api/types/${TYPE}/events?limit=5000`), 'bad-limit'],
      [get(`api/types/${TYPE}/events?group=${encodeURIComponent('a b')}`), 'bad-group'],
      [get(`api/types/${TYPE}/timeline?horizon=forever`), 'bad-horizon'],
      [post(`api/types/${TYPE}/events/later-0/reschedule`, { delay: 'tomorrow-ish' }), 'bad-delay'],
      [post(`api/types/${TYPE}/events/later-0/reschedule`, { delay: -5 }), 'bad-delay'],
      [post(`api/types/${TYPE}/events/later-0/reschedule`, {}), 'bad-delay'],
      [post(`api/types/${TYPE}/dead-letters/purge`, {}), 'bad-selection'],
      [post(`api/types/${TYPE}/dead-letters/purge`, { ids: [] }), 'bad-selection'],
      [post(`api/types/${TYPE}/dead-letters/replay`, { ids: [42] }), 'bad-selection'],
      [post(`api/types/${TYPE}/dead-letters/replay`, '{not json'), 'bad-json'],
    ];
    for (const [call, code] of cases) {
      const answer = await call;
      expect(answer.status, code).toBe(400);
      expect(answer.json.error.code, JSON.stringify(answer.json)).toBe(code);
      expect(answer.json.error.message.length).toBeGreaterThan(10);
    }
    expect((await get('api/nothing-here')).status).toBe(404);
    expect(await snapshot(prefix)).toEqual(before);
  });

  it('refuses actions from another site, without the action header or without a JSON body', async () => {
    const { call, prefix } = await setUp();
    const before = await snapshot(prefix);
    const purge = `api/types/${TYPE}/dead-letters/purge`;
    const body = { all: true };
    const refused = [
      await call('POST', purge, { body, headers: { 'content-type': 'application/json' } }),
      await call('POST', purge, { body, headers: { ...ACTION, origin: 'https://evil.example' } }),
      await call('POST', purge, { body, headers: { ...ACTION, 'sec-fetch-site': 'cross-site' } }),
      await call('POST', purge, { body: 'all=true', headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-delayed-events-action': '1' } }),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 403, 403, 415]);
    expect(await snapshot(prefix)).toEqual(before);
    // The same request from the page itself goes through.
    const own = await call('POST', purge, { body, headers: { ...ACTION, 'sec-fetch-site': 'same-origin', origin: new URL(served[0]!.url).origin } });
    expect(own.json).toEqual({ count: 3 });
  });

  /** A request as a hostile page or client would send it: any Host, any request target, any header. */
  function raw(
    dashboardUrl: string,
    options: { method?: string; target: string; headers?: Record<string, string>; body?: string },
  ): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
    const { port } = new URL(dashboardUrl);
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, method: options.method ?? 'GET', path: options.target, headers: options.headers ?? {} }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      });
      req.on('error', reject);
      req.end(options.body);
    });
  }

  it('without auth answers only to loopback names: a page that rebinds its own name to 127.0.0.1 is refused', async () => {
    const { dashboard, prefix } = await setUp();
    const { port } = new URL(dashboard.url);
    const before = await snapshot(prefix);
    const rebound = { host: `attacker.example:${port}`, origin: `http://attacker.example:${port}` };
    expect((await raw(dashboard.url, { target: '/api/overview', headers: rebound })).status).toBe(403);
    const purge = await raw(dashboard.url, { method: 'POST', target: `/api/types/${TYPE}/dead-letters/purge`, headers: { ...rebound, ...ACTION }, body: '{"all":true}' });
    expect(purge.status).toBe(403);
    expect(await snapshot(prefix)).toEqual(before);
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) expect((await raw(dashboard.url, { target: '/api/overview', headers: { host } })).status, host).toBe(200);
    // An absolute-form request line for another host is refused too.
    expect((await raw(dashboard.url, { target: 'http://attacker.example/api/overview', headers: { host: `127.0.0.1:${port}` } })).status).toBe(400);
  });

  it('answers to the names it is told, and with auth to any name', async () => {
    const allowed = await setUp({ allowedHosts: ['ops.example.com'] });
    const { port } = new URL(allowed.dashboard.url);
    expect((await raw(allowed.dashboard.url, { target: '/api/overview', headers: { host: `ops.example.com:${port}` } })).status).toBe(200);
    expect((await raw(allowed.dashboard.url, { target: '/api/overview', headers: { host: `other.example.com:${port}` } })).status).toBe(403);
    const token = 'a-long-enough-dashboard-token';
    // A name with a port would never match a Host's name: refused where it is given.
    expect(() => createDashboard(allowed.service, { allowedHosts: ['ops.example.com:8080'] })).toThrow(InvalidOptionError);
    const authed = await setUp({ auth: { token } });
    expect((await raw(authed.dashboard.url, { target: '/api/overview', headers: { host: 'behind.proxy.example', authorization: `Bearer ${token}` } })).status).toBe(200);
  });

  it('never redirects off its own origin or base path, and copies nothing from the request into a header unescaped', async () => {
    const { dashboard } = await setUp({ auth: { token: 'a-long-enough-dashboard-token' } });
    const { port } = new URL(dashboard.url);
    const host = `127.0.0.1:${port}`;
    const offsite = await raw(dashboard.url, { target: `//evil.example:${port}`, headers: { host } });
    expect([301, 302, 303, 307, 308]).not.toContain(offsite.status);
    const opened = await raw(dashboard.url, { target: '/index.html;x=%0d%0aSet-Cookie:%20a=b?token=a-long-enough-dashboard-token', headers: { host } });
    for (const value of [opened.headers.location, ...(opened.headers['set-cookie'] ?? [])]) {
      if (value === undefined) continue;
      expect(value).not.toMatch(/[\r\n;,]\s*(Set-Cookie|a=b)/i);
      expect(value).not.toMatch(/^\/\//);
    }
  });

  it('takes the token from the header or its cookie only, once from the address of the page, and a bad cookie is a 401', async () => {
    const token = 'a-long-enough-dashboard-token';
    const { call, prefix } = await setUp({ auth: { token } });
    const before = await snapshot(prefix);
    expect((await call('GET', `api/overview?token=${token}`)).status).toBe(401);
    expect((await call('POST', `api/types/${TYPE}/dead-letters/purge?token=${token}`, { body: { all: true } })).status).toBe(401);
    expect((await call('GET', 'api/overview', { headers: { cookie: 'delayed_events_token=%E0%A4%A' } })).status).toBe(401);
    expect(await snapshot(prefix)).toEqual(before);
  });

  it('takes actions with exactly a JSON content type', async () => {
    const { call, prefix } = await setUp();
    const before = await snapshot(prefix);
    const purge = `api/types/${TYPE}/dead-letters/purge`;
    for (const type of ['application/json;x', 'application/json; boundary=1', 'application/jsonx']) {
      expect((await call('POST', purge, { body: { all: true }, headers: { 'content-type': type, 'x-delayed-events-action': '1' } })).status, type).toBe(415);
    }
    expect(await snapshot(prefix)).toEqual(before);
    expect((await call('POST', purge, { body: { all: true }, headers: { 'content-type': 'application/json; charset=utf-8', 'x-delayed-events-action': '1' } })).json).toEqual({ count: 3 });
  });

  it('in read-only mode says so and refuses every action', async () => {
    const { get, post, prefix } = await setUp({ readOnly: true });
    expect((await get('api/overview')).json.readOnly).toBe(true);
    const before = await snapshot(prefix);
    for (const path of [`api/types/${TYPE}/pause`, `api/types/${TYPE}/events/later-0/cancel`, `api/types/${TYPE}/dead-letters/purge`]) {
      const answer = await post(path, { all: true });
      expect(answer.status, path).toBe(403);
      expect(answer.json.error.code).toBe('read-only');
    }
    expect(await snapshot(prefix)).toEqual(before);
    expect((await get(`api/types/${TYPE}/events?state=dead`)).json.events).toHaveLength(3);
  });

  it('with a token, answers 401 without it, and takes it as a bearer header or once in the address', async () => {
    const token = 'a-long-enough-dashboard-token';
    const { call, prefix } = await setUp({ auth: { token } });
    const before = await snapshot(prefix);
    for (const path of ['', 'assets/app.js', 'api/overview', 'api/live', `api/types/${TYPE}/events`]) {
      expect((await call('GET', path)).status, path).toBe(401);
    }
    expect((await call('POST', `api/types/${TYPE}/dead-letters/purge`, { body: { all: true } })).status).toBe(401);
    expect((await call('GET', 'api/overview', { headers: { authorization: 'Bearer wrong-token-of-some-length' } })).status).toBe(401);
    expect(await snapshot(prefix)).toEqual(before);

    expect((await call('GET', 'api/overview', { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    const opened = await call('GET', `?token=${token}`);
    expect(opened.status).toBe(303);
    expect(opened.headers.get('location')).not.toContain(token);
    const cookie = opened.headers.get('set-cookie')!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    const withCookie = await call('GET', 'api/overview', { headers: { cookie: cookie.split(';')[0]! } });
    expect(withCookie.status).toBe(200);
  });

  it('with basic auth, asks for it and takes the right user and password only', async () => {
    const { call } = await setUp({ auth: { basic: { username: 'ops', password: 's3cret' } } });
    const none = await call('GET', 'api/overview');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Basic /);
    const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });
    expect((await call('GET', 'api/overview', { headers: basic('ops', 'wrong') })).status).toBe(401);
    expect((await call('GET', 'api/overview', { headers: basic('ops', 's3cret') })).status).toBe(200);
  });

  it('serves its page and assets itself, under a strict content security policy', async () => {
    const { call } = await setUp();
    const page = await call('GET', '');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.text).not.toMatch(/https?:\/\//);
    const script = await call('GET', 'assets/app.js');
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toMatch(/javascript/);
    expect(script.text.length).toBeGreaterThan(20_000);
    expect(script.text).not.toMatch(/src=["']https?:|cdn\./);
    expect((await call('GET', 'assets/app.css')).headers.get('content-type')).toMatch(/css/);
    expect((await call('GET', 'assets/other.js')).status).toBe(404);
  });

  it('mounted under a path, redirects to it with a slash and serves everything below it', async () => {
    const prefix = redis.prefix();
    await seedOrders(redis, prefix);
    const dashboard = await serveDashboard(redis.service({ prefix }), { basePath: '/ops/events' });
    served.push(dashboard);
    const origin = new URL(dashboard.url).origin;
    const bare = await fetch(`${origin}/ops/events`, { redirect: 'manual' });
    expect(bare.status).toBe(301);
    expect(bare.headers.get('location')).toBe('/ops/events/');
    expect((await fetch(`${origin}/ops/events/`)).status).toBe(200);
    const overview = (await (await fetch(`${origin}/ops/events/api/overview`)).json()) as { types: Array<{ type: string }> };
    expect(overview.types.map((t) => t.type)).toEqual([TYPE]);
  });

  it('pushes the overview to open pages as server-sent events', async () => {
    const { dashboard, service } = await setUp({ refreshMs: 200 });
    const controller = new AbortController();
    const response = await fetch(new URL('api/live', dashboard.url), { signal: controller.signal });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = response.body!.getReader();
    let seen = '';
    const frames = async () => {
      const { value } = await reader.read();
      seen += new TextDecoder().decode(value);
      return seen;
    };
    await waitFor(async () => (await frames()).includes('"scheduled":9'), 'an overview frame with 9 scheduled');
    await service.enqueue(new OrderDue('late-comer'), { minutes: 5 });
    await waitFor(async () => (await frames()).includes('"scheduled":10'), 'a later frame with 10 scheduled');
    controller.abort();
  });

  it('reports its own health, and refuses bad options with a typed error', async () => {
    const { get } = await setUp();
    expect((await get('api/health')).json).toMatchObject({ ready: true, redis: 'up' });
    const service = redis.service();
    expect(() => createDashboard(service, { auth: { token: 'short' } })).toThrow(InvalidOptionError);
    expect(() => createDashboard(service, { basePath: 'no-slash' })).toThrow(InvalidOptionError);
    expect(() => createDashboard(service, { refreshMs: 1 })).toThrow(InvalidOptionError);
    // Past what a timer waits, a refresh would poll Redis every millisecond and a timeout answer 503 at once.
    for (const ms of [2 ** 31, Number.POSITIVE_INFINITY, Number.NaN]) {
      expect(() => createDashboard(service, { refreshMs: ms })).toThrow(/option refreshMs: must be from 100 to 3600000 ms/);
      expect(() => createDashboard(service, { timeoutMs: ms })).toThrow(/option timeoutMs: must be from 100 to 3600000 ms/);
    }
  });

  // Kills and restarts the one server; its cluster counterpart would be a failover, which the service's own tests cover.
  it.skipIf(redis.topology === 'cluster')('while Redis is down answers 503, and carries on once it is back', async () => {
    const prefix = redis.prefix();
    await seedOrders(redis, prefix);
    const dashboard = await serveDashboard(redis.service({ prefix }), { timeoutMs: 1_000 });
    served.push(dashboard);
    const overview = () => fetch(new URL('api/overview', dashboard.url));
    expect((await overview()).status).toBe(200);
    await redis.server.kill();
    try {
      const down = await overview();
      expect(down.status).toBe(503);
      expect(((await down.json()) as { error: { code: string } }).error.code).toBe('redis-unavailable');
    } finally {
      await redis.server.restart();
    }
    await waitFor(async () => (await overview()).status === 200, 'the overview once Redis is back');
  });
});
