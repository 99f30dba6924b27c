import 'reflect-metadata';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, type Page, chromium } from 'playwright-core';
import { lastValueFrom } from 'rxjs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DelayedEvent, DelayedEventService, PermanentFailure } from '../src';
import { HOSTILE, OrderDue, type ServedDashboard, seedOrders, serveDashboard } from './support/dashboard-fixture';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/** Debian's chromium package; `.ci/run` installs it when it is missing. No browser is downloaded. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = join(__dirname, '..', 'test-artifacts');

@DelayedEvent('dash.invoice')
class InvoiceDue {
  constructor(
    readonly id: string = '',
    readonly amount: number = 0,
  ) {}
}

describe('the dashboard in a real browser', () => {
  const redis = useRedis();
  let browser: Browser;
  let dashboard: ServedDashboard;
  let page: Page;
  let source: DelayedEventService;
  let prefix: string;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (or set CHROMIUM_PATH)`);
    rmSync(ARTIFACTS, { recursive: true, force: true });
    mkdirSync(ARTIFACTS, { recursive: true });
    prefix = redis.prefix();
    await seedOrders(redis, prefix);
    // A second type, handled by a worker in two groups, so the charts and the per-group rows have something to show.
    const worker = redis.service({ prefix });
    worker.addHandler(InvoiceDue, async () => undefined, 8);
    worker.addHandler(InvoiceDue, async () => undefined, 8, { group: 'audit' });
    await lastValueFrom(worker.enqueueBatch(Array.from({ length: 200 }, (_, i) => ({ event: new InvoiceDue(`inv-${i}`, i), delay: (i % 20) * 50 }))));
    await waitFor(async () => (await worker.counts(InvoiceDue))?.groups?.audit?.scheduled === 0 && (await worker.counts(InvoiceDue))?.scheduled === 0, 'invoices handled');
    await lastValueFrom(worker.enqueueBatch(Array.from({ length: 120 }, (_, i) => ({ event: new InvoiceDue(`next-${i}`, i), delay: { minutes: 2 + (i % 50) } }))));
    await worker.close();

    // Its own service: the harness closes the ones it makes after each test, and this one serves them all.
    source = new DelayedEventService({ redis: redis.connection(), prefix });
    dashboard = await serveDashboard(source, { refreshMs: 500 });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        // A name an attacker's DNS answers with the loopback address (DNS rebinding).
        '--host-resolver-rules=MAP rebound.example 127.0.0.1',
      ],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  }, 120_000);

  afterEach(async (context) => {
    if (context.task.result?.state === 'fail') await page?.screenshot({ path: join(ARTIFACTS, `failed-${context.task.name.replace(/\W+/g, '-')}.png`), fullPage: true });
  });

  afterAll(async () => {
    await browser?.close();
    await dashboard?.close();
    await source?.close();
  });

  it('shows every type with its counts, live', async () => {
    const requests: string[] = [];
    page.on('request', (request) => requests.push(request.url()));
    await page.goto(dashboard.url);
    const order = page.locator('tr[data-type="dash.order"]');
    await order.waitFor();
    await expect.poll(() => order.locator('td').allInnerTexts()).toEqual(['dash.order', '9', '0', '0', '3', '']);
    await page.locator('tr[data-group="audit"]').waitFor();
    await page.locator('[data-testid="live"]', { hasText: 'live' }).waitFor();
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-overview.png'), fullPage: true });
    // Everything it loaded came from the dashboard itself.
    expect(requests.every((url) => url.startsWith(new URL(dashboard.url).origin))).toBe(true);
  });

  it('charts a type and lists its events per state', async () => {
    await page.goto(`${dashboard.url}#/types/dash.invoice`);
    await page.locator('[data-testid="activity-chart"] canvas').waitFor();
    await page.locator('[data-testid="timeline-chart"] canvas').waitFor();
    await expect.poll(() => page.locator('[data-testid="timeline-summary"]').innerText()).toMatch(/^120 due in the next 1h/);
    await expect.poll(() => page.locator('[data-testid="events"] tbody tr').count()).toBe(50);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-type.png'), fullPage: true });
  });

  it('opens an event and shows a hostile payload and error as text', async () => {
    await page.goto(`${dashboard.url}#/types/dash.order/scheduled`);
    await page.locator('tr[data-id="hostile"] a').click();
    const payload = page.locator('[data-testid="event-payload"]');
    await payload.waitFor();
    // Shown as the JSON it is stored as, quotes escaped, markup as characters.
    expect(await payload.innerText()).toContain(JSON.stringify(HOSTILE));
    expect(await page.locator('[data-testid="event-state"]').innerText()).toBe('Scheduled');
    expect(await page.locator('[data-testid="event-priority"]').innerText()).toBe('3');
    expect(await page.locator('[data-testid="event-explanation"]').innerText()).toMatch(/^not due until \d\d:\d\d:\d\d\.\d{3} \(in \d+ s\)$/);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-event.png'), fullPage: true });

    await page.goto(`${dashboard.url}#/types/dash.order/dead`);
    await page.locator('tr[data-id="dead-0"]').waitFor();
    expect(await page.locator('tr[data-id="dead-0"] td.error-cell').innerText()).toContain(HOSTILE);
    // Nothing the payloads or errors hold became markup or ran.
    expect(await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    expect(await page.locator('script').count()).toBe(1);
  });

  it('replays a dead letter through the page, after asking, and it leaves the list', async () => {
    await page.goto(`${dashboard.url}#/types/dash.order/dead`);
    const row = page.locator('tr[data-id="dead-1"]');
    await row.waitFor();
    await row.locator('input[type="checkbox"]').check();
    await page.locator('[data-testid="replay-selected"]').click();
    // Nothing happens until the question is answered.
    await page.locator('[role="dialog"]').waitFor();
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-confirm.png') });
    await page.locator('[data-testid="confirm"]').click();
    await row.waitFor({ state: 'detached' });
    await expect.poll(() => page.locator('[data-testid="events"] tbody tr').count()).toBe(2);
    await expect.poll(async () => ((await fetch(new URL('api/types/dash.order/events/dead-1', dashboard.url)).then((r) => r.json())) as { state: string }).state).toBe('scheduled');
  });

  it('refuses a page whose name was rebound to loopback, and serves the same page by its loopback name', async () => {
    const port = new URL(dashboard.url).port;
    const rebound = await page.goto(`http://rebound.example:${port}/`);
    expect(rebound?.status()).toBe(403);
    // Nor does a script of that origin read the API.
    expect(await page.evaluate(async () => (await fetch('api/overview')).status)).toBe(403);
    const served = await page.goto(dashboard.url);
    expect(served?.status()).toBe(200);
    await page.locator('tr[data-type="dash.order"]').waitFor();
  });

  it('opened with ?token=, cleans its address and works from the cookie it set', async () => {
    const token = 'browser-token-0123456789';
    const guarded = await serveDashboard(source, { auth: { token }, refreshMs: 500 });
    try {
      await page.goto(`${guarded.url}?token=${token}`);
      await page.locator('tr[data-type="dash.order"]').waitFor();
      expect(page.url()).not.toContain('token');
      // The API answers the page by its cookie; without it, nothing.
      expect(await page.evaluate(async () => (await fetch('api/overview')).status)).toBe(200);
      const stranger = await browser.newPage();
      try {
        expect((await stranger.goto(guarded.url))?.status()).toBe(401);
      } finally {
        await stranger.close();
      }
    } finally {
      await guarded.close();
    }
  });

  it('in read-only mode shows no action at all', async () => {
    const readOnly = await serveDashboard(source, { readOnly: true, refreshMs: 500 });
    try {
      await page.goto(`${readOnly.url}#/types/dash.order/dead`);
      await page.locator('tr[data-id="dead-0"]').waitFor();
      await page.locator('.badge', { hasText: 'read-only' }).waitFor();
      expect(await page.locator('[data-testid="pause-toggle"]').count()).toBe(0);
      expect(await page.locator('[data-testid="replay-selected"]').count()).toBe(0);
      expect(await page.locator('tr[data-id="dead-0"] input[type="checkbox"]').count()).toBe(0);
      await page.locator('tr[data-id="dead-0"] a').click();
      await page.locator('[data-testid="event-fields"]').waitFor();
      expect(await page.locator('button').count()).toBe(0);
    } finally {
      await readOnly.close();
    }
  });

  it("replays a group's dead letter from its event page, and shows every schedule and the live instances", async () => {
    const worker = new DelayedEventService({ redis: redis.connection(), prefix });
    try {
      worker.addHandler(
        OrderDue,
        () => {
          throw new PermanentFailure('billing refused it');
        },
        1,
        { group: 'billing' },
      );
      await worker.enqueue(new OrderDue('billed-0', 'b'), 0);
      await waitFor(async () => (await worker.deadLetters(OrderDue, { group: 'billing' })).some((l) => l.id === 'billed-0'), 'dead in billing');
      await worker.removeHandler(OrderDue, 'billing');

      await page.goto(`${dashboard.url}#/types/dash.order/events/billed-0`);
      await page.locator('[data-testid="event-fields"]').waitFor();
      await page.locator('[data-testid="replay-one"]').click();
      await page.locator('[data-testid="confirm"]').click();
      // What the server did, in the group that held it: never a success for nothing done.
      await page.locator('[role="status"]', { hasText: 'Replayed 1 dead letter in group billing' }).waitFor();
      await expect.poll(async () => (await source.find(OrderDue, 'billed-0'))?.groups?.billing).toBe('scheduled');

      await source.schedule('weekday-report', new OrderDue('', 'r'), { cron: '0 9 * * 1-5', tz: 'Europe/Paris' });
      await page.goto(`${dashboard.url}#/schedules`);
      const schedule = page.locator('tr[data-schedule="dash.order/weekday-report"]');
      await schedule.waitFor();
      expect(await schedule.innerText()).toContain('09:00 Mon–Fri Europe/Paris');
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-schedules.png'), fullPage: true });

      worker.addHandler(OrderDue, async () => undefined, 3);
      await page.goto(`${dashboard.url}#/instances`);
      await page.locator('[data-testid="instances"] tbody tr').first().waitFor();
      expect(await page.locator('[data-testid="instances"]').innerText()).toContain('dash.order');
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-instances.png'), fullPage: true });
    } finally {
      await worker.close();
      await source.unschedule(OrderDue, 'weekday-report');
    }
  });

  it('drains a type from its page after asking, and says how many went (since 0.6)', async () => {
    await page.goto(`${dashboard.url}#/types/dash.invoice`);
    await page.locator('[data-testid="drain"]').click();
    // Nothing happens until the question is answered.
    await page.locator('[role="dialog"]', { hasText: 'Drain dash.invoice?' }).waitFor();
    expect((await source.counts(InvoiceDue))?.scheduled).toBe(120);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-drain.png') });
    await page.locator('[data-testid="confirm"]').click();
    await page.locator('[role="status"]', { hasText: 'Drained 120' }).waitFor();
    expect(await source.counts(InvoiceDue)).toMatchObject({ scheduled: 0, ready: 0 });
  });
});
