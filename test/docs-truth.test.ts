import 'reflect-metadata';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as api from '../src';
import { HANDLER_OPTION_KEYS } from '../src/service/handler-options';
import { SERVICE_OPTION_KEYS } from '../src/service/service-options';

const ROOT = join(__dirname, '..');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The code blocks of a Markdown text. */
const codeBlocks = (text: string) => [...text.matchAll(/```(?:ts|js|typescript)\n([\s\S]*?)```/g)].map((m) => m[1]!);

/** The rows of every table of a Markdown text, as cells. */
const tableRows = (text: string) =>
  text
    .split('\n')
    .filter((line) => line.startsWith('| ') && !/^\|[-| ]+\|$/.test(line))
    .map((line) =>
      line
        .replace(/\\\|/g, '¦')
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );

/**
 * What the docs promise and the code must keep true: the install line, the
 * migration guide against the exports, the Prometheus table against what the
 * exporter registers, and the marks on what is newer than the last release.
 */
describe('the docs tell the truth', () => {
  it("the README's install line names every package the docs' examples import (but the optional integrations, which say how to install them)", () => {
    const install =
      read('README.md')
        .match(/^npm install (reactive-delayed-events .*)$/m)?.[1]
        ?.split(/\s+/) ?? [];
    // Installed on their own sections' lines, or the app's own (a web framework, a logger), or the guide's peer.
    const ownLine = new Set(['@nestjs/common', '@opentelemetry/sdk-node', 'prom-client', 'express', 'fastify', 'pino', 'bullmq', 'vitest']);
    const imported = new Set<string>();
    for (const path of [...DOCS, ...readdirSync(join(ROOT, 'examples')).map((f) => `examples/${f}`)]) {
      const text = path.endsWith('.md') ? codeBlocks(read(path)).join('\n') : read(path);
      for (const [, spec] of text.matchAll(/^import .*?from '([^'.][^']*)'/gm)) {
        if (spec!.startsWith('node:') || spec!.startsWith('reactive-delayed-events')) continue;
        imported.add(spec!.startsWith('@') ? spec!.split('/').slice(0, 2).join('/') : spec!.split('/')[0]!);
      }
      for (const [, spec] of text.matchAll(/^import '([^'.][^']*)'/gm)) imported.add(spec!);
    }
    const missing = [...imported].filter((name) => !install.includes(name) && !ownLine.has(name));
    expect(missing, 'imported by an example, not on the install line').toEqual([]);
    expect(install).toEqual(expect.arrayContaining(['reactive-delayed-events', 'ioredis', 'class-transformer', 'reflect-metadata', 'rxjs']));
  });

  describe('docs/migrating-from-bullmq.md', () => {
    const guide = read('docs/migrating-from-bullmq.md');
    const rows = tableRows(guide).filter((cells) => cells.length === 2 && cells[0] !== 'BullMQ');

    it("has a row for every call of BullMQ's Queue, Worker, Job, QueueEvents and FlowProducer, and every job option", () => {
      const bullmq = rows.map((cells) => cells[0]).join('\n');
      const expected = [
        // Queue
        'queue.add(',
        'queue.addBulk(',
        'queue.getJob(',
        'queue.getJobs(',
        'queue.getJobCounts(',
        'queue.pause(',
        'queue.resume(',
        'queue.isPaused(',
        'queue.remove(',
        'queue.drain(',
        'queue.clean(',
        'queue.obliterate(',
        'queue.retryJobs(',
        'queue.promoteJobs(',
        'queue.upsertJobScheduler(',
        'queue.getJobSchedulers(',
        'queue.removeJobScheduler(',
        'queue.setGlobalConcurrency(',
        'queue.setGlobalRateLimit(',
        'queue.getRateLimitTtl(',
        'queue.getWorkers(',
        'queue.getMetrics(',
        'queue.getCountsPerPriority(',
        'queue.getJobScheduler(',
        'queue.waitUntilReady(',
        'queue.disconnect(',
        'queue.exportPrometheusMetrics(',
        'queue.close(',
        // job options
        '`delay`',
        '`jobId`',
        '`deduplication',
        '`attempts`',
        '`backoff',
        '`priority`',
        '`lifo`',
        '`removeOnComplete',
        '`removeOnFail',
        '`repeat',
        '`parent`',
        // Worker
        '`concurrency`',
        '`limiter',
        'worker.rateLimit(',
        'worker.close(',
        'worker.pause(',
        '`lockDuration`',
        '`maxStalledCount`',
        "worker.on('completed'",
        "worker.on('error')",
        "worker.on('drained')",
        'worker.getNextJob(',
        'worker.extendJobLocks(',
        // Job
        'job.remove(',
        'job.retry(',
        'job.promote(',
        'job.changeDelay(',
        'job.changePriority(',
        'job.moveToDelayed(',
        'job.updateData(',
        'job.updateProgress(',
        'job.log(',
        '`job.returnvalue`',
        'job.waitUntilFinished(',
        'job.getState(',
        'Job.fromId(',
        'job.moveToFailed(',
        'UnrecoverableError',
        // QueueEvents, FlowProducer
        'new QueueEvents(',
        "on('progress')",
        "on('retries-exhausted')",
        "on('cleaned')",
        'new FlowProducer(',
        'flow.getFlow(',
      ];
      expect(expected.filter((name) => !bullmq.includes(name))).toEqual([]);
    });

    it('names only calls, options and exports that exist here', () => {
      const here = rows.map((cells) => cells[1]!).join('\n');
      const service = api.DelayedEventService.prototype as unknown as Record<string, unknown>;
      const serviceCalls = [...here.matchAll(/service\.([a-zA-Z]+)\(/g)].map((m) => m[1]!);
      expect(serviceCalls.length).toBeGreaterThan(20);
      expect(serviceCalls.filter((name) => typeof service[name] !== 'function')).toEqual([]);
      const delivery = read('src/runtime/handler-invocation.ts');
      const deliveryFields = [...here.matchAll(/delivery\.([a-zA-Z]+)/g)].map((m) => m[1]!);
      expect(deliveryFields.filter((name) => !new RegExp(`readonly ${name}\\b|\\b${name}\\(`).test(delivery))).toEqual([]);
      // Capitalised names and the policy builders are exports of the package.
      const exported = new Set(Object.keys(api));
      const named = [...here.matchAll(/`(?:new |throw new )?([A-Z][A-Za-z]+|[a-z]+Backoff|createInspector)\b/g)].map((m) => m[1]!);
      expect(named.filter((name) => !exported.has(name) && !['EventClass', 'Date'].includes(name))).toEqual([]);
      // Options named as `option:` or `{ option }` are the service's or a handler's.
      const options = new Set([...Object.keys(SERVICE_OPTION_KEYS), ...Object.keys(HANDLER_OPTION_KEYS)]);
      const optionNames = [...here.matchAll(/`(keep[A-Z][a-zA-Z]+|[a-z]+Ms|rateLimit|globalConcurrency|perKey|parallelism|maxPayloadBytes)\b/g)].map((m) => m[1]!);
      expect(optionNames.filter((name) => !options.has(name) && !['olderThanMs', 'windowMs', 'timeoutMs'].includes(name) && !name.endsWith('Ms'))).toEqual([]);
      for (const name of ['keepDead', 'keepHandled', 'rateLimit', 'globalConcurrency', 'perKey', 'parallelism', 'maxPayloadBytes', 'readerBlockMs', 'idempotencyWindowMs']) {
        if (here.includes(`\`${name}`)) expect(options.has(name), name).toBe(true);
      }
    });

    it('says "not offered" only of what is not offered', () => {
      // Each feature this release has, and the words a "not offered" row would use for it.
      const offered: Record<string, RegExp> = {
        'rate limiting': /rate limit|limiter/i,
        priorities: /priorit/i,
        groups: /groups?\b/i,
        batches: /batch/i,
        clean_up: /drain|clean|obliterate/i,
        snooze: /moveToDelayed|snooze/i,
        retention: /removeOn/i,
      };
      for (const [bullmq, here] of rows) {
        if (!/^not offered/.test(here!)) continue;
        for (const [feature, words] of Object.entries(offered)) expect(words.test(bullmq!), `"${bullmq}" is marked not offered, but ${feature} is`).toBe(false);
      }
    });
  });

  it('the Prometheus table lists every metric the exporter registers', () => {
    const source = read('src/integrations/prometheus/index.ts');
    const names = new Set([...source.matchAll(/name: '([a-z_]+)'/g), ...source.matchAll(/\$\{prefix\}([a-z_]+)/g)].map((m) => `delayed_events_${m[1]}`));
    const documented = new Set(tableRows(read('docs/api.md')).map((cells) => cells[0]!.replace(/`/g, '')));
    expect([...names].filter((name) => !documented.has(name))).toEqual([]);
  });

  it('marks each section of api.md about a feature newer than the last release "since 0.6"', () => {
    const text = read('docs/api.md');
    const newer = ['enqueueMany', 'drain(', 'clean(', 'obliterate(', 'keepDead', 'Snooze', 'Priorities', 'Outcomes'];
    const sections = text.split(/^(?=#{2,4} )/m);
    const unmarked = sections
      .filter((section) => newer.some((name) => section.split('\n')[0]!.includes(name)))
      .filter((section) => !/since 0\.6/i.test(section.slice(0, 600)))
      .map((section) => section.split('\n')[0]);
    expect(unmarked).toEqual([]);
  });
});
