import 'reflect-metadata';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import express from 'express';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { DelayedEventService } from '../src';
import { createDashboard } from '../src/dashboard';
import { seedOrders } from './support/dashboard-fixture';
import { useRedis } from './support/harness';

const ACTION = { 'content-type': 'application/json', 'x-delayed-events-action': '1' };

/**
 * docs/recipes.md mounts the dashboard in Express, Fastify and NestJS; these
 * are those recipes, run: the page, a read and an action (through each
 * framework's own body parser) must all work under the mount path.
 */
describe('the dashboard mounted in a web framework', () => {
  const redis = useRedis();
  const closers: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });

  async function seeded(): Promise<DelayedEventService> {
    const prefix = redis.prefix();
    await seedOrders(redis, prefix);
    return redis.service({ prefix });
  }

  /** What each recipe must do, at `base` (ending in the mount path, no slash). */
  async function exercise(base: string, service: DelayedEventService): Promise<void> {
    const bare = await fetch(base, { redirect: 'manual' });
    expect(bare.status).toBe(301);
    expect(bare.headers.get('location')).toBe(`${new URL(base).pathname}/`);
    const page = await fetch(`${base}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('assets/app.js');
    expect((await fetch(`${base}/assets/app.js`)).status).toBe(200);
    const overview = (await (await fetch(`${base}/api/overview`)).json()) as { types: Array<{ type: string }> };
    expect(overview.types.map((t) => t.type)).toEqual(['dash.order']);
    const moved = await fetch(`${base}/api/types/dash.order/events/later-0/reschedule`, { method: 'POST', headers: ACTION, body: JSON.stringify({ delay: '3h' }) });
    expect(moved.status).toBe(200);
    expect((await service.find('dash.order', 'later-0'))!.dueAt.getTime()).toBeGreaterThan(Date.now() + 170 * 60_000);
    const bad = await fetch(`${base}/api/types/dash.order/events/later-1/reschedule`, { method: 'POST', headers: ACTION, body: JSON.stringify({ delay: 'whenever' }) });
    expect(bad.status).toBe(400);
  }

  it('Express: app.use(path, handler), behind express.json()', async () => {
    const service = await seeded();
    const app = express();
    app.use(express.json());
    app.use('/ops/events', createDashboard(service));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    closers.push(() => new Promise((resolve) => server.close(resolve)));
    await exercise(`http://127.0.0.1:${(server.address() as AddressInfo).port}/ops/events`, service);
  });

  it('Fastify: a hijacked route on the raw request, with basePath', async () => {
    const service = await seeded();
    const app = Fastify();
    const dashboard = createDashboard(service, { basePath: '/ops/events' });
    const serve = (request: { raw: IncomingMessage; body?: unknown }, reply: { hijack(): void; raw: ServerResponse }) => {
      reply.hijack();
      // Fastify parsed the JSON body already: hand it on.
      dashboard(Object.assign(request.raw, { body: request.body }), reply.raw);
    };
    app.all('/ops/events', serve);
    app.all('/ops/events/*', serve);
    await app.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => app.close());
    await exercise(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/ops/events`, service);
  });

  it('NestJS: app.use(path, handler) on the Express platform', async () => {
    const service = await seeded();
    @Controller()
    class Empty {}
    @Module({ controllers: [Empty] })
    class AppModule {}
    const app = await NestFactory.create<NestExpressApplication>(AppModule, { logger: false });
    app.use('/ops/events', createDashboard(service));
    await app.listen(0, '127.0.0.1');
    closers.push(() => app.close());
    await exercise(`http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}/ops/events`, service);
  });
});
