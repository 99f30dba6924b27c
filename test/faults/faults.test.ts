import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisServer } from '../support/redis-server';
import { TcpProxy } from '../support/tcp-proxy';
import { Fleet, type LedgerReport, checkLedger } from './fleet';

/** Scale knob for a quick local run: FAULT_SCALE=0.1 runs a tenth of the events. */
const SCALE = Number(process.env.FAULT_SCALE ?? 1);
const LEASE_MS = 3_000; // HANDLER_TIMEOUT_MS 2,000 + LEASE_GRACE_MS 1,000 in fault-worker.ts
const TYPE_KEYS = (prefix: string) => `${prefix}:{fault.event}`;

function report(scenario: string, ledger: LedgerReport, extra: Record<string, number | string> = {}): void {
  const figures = {
    events: ledger.accepted,
    handled: ledger.handled,
    deadLettered: ledger.deadLettered,
    lost: ledger.lost.length,
    duplicates: ledger.duplicates,
    afterKill: ledger.duplicatesAfterKill,
    afterOutage: ledger.duplicatesAfterOutage,
    afterStall: ledger.duplicatesAfterStall,
    enqueuedTwice: ledger.enqueuedTwice.length,
    rerunUnstarted: ledger.rerunUnstarted.length,
    ...extra,
  };
  console.log(`FIGURES ${scenario}: ${JSON.stringify(figures)}`);
}

async function deadLettered(redis: Redis, prefix: string): Promise<Set<string>> {
  return new Set(await redis.zrange(`${TYPE_KEYS(prefix)}:d`, '0', '-1'));
}

/** Waits until every accepted event has a success and Redis holds none of them, then checks none is handled again. */
async function drainAndSettle(fleet: Fleet, redis: Redis, prefix: string, timeoutMs: number): Promise<void> {
  await fleet.until(async () => (await redis.hlen(`${TYPE_KEYS(prefix)}:m`)) === 0 && fleet.lines.some((l) => l.produced !== undefined), 'every event completed', timeoutMs);
  const startsBefore = fleet.lines.filter((l) => l.start).length;
  // Longer than a lease: an event whose success was recorded must not come back.
  await new Promise((resolve) => setTimeout(resolve, LEASE_MS + 1_000));
  expect(fleet.lines.filter((l) => l.start).length).toBe(startsBefore);
}

describe('fault injection: every accepted event is handled at least once or dead-lettered', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A private redis-server, a client on it (quiet through the outages a scenario causes) and a fleet, all stopped after the test. */
  async function scenario(serverArgs: string[] = []): Promise<{ server: RedisServer; redis: Redis; fleet: Fleet }> {
    const server = await RedisServer.start(serverArgs);
    const redis = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: null });
    redis.on('error', () => undefined);
    const fleet = new Fleet();
    cleanups.push(async () => {
      await fleet.stopAll();
      redis.disconnect();
      await server.stop();
    });
    return { server, redis, fleet };
  }

  it('1. consumers killed with SIGKILL every few seconds and restarted', async () => {
    const { server, redis, fleet } = await scenario();
    const prefix = 'kill';
    const env = { REDIS_URL: server.url, PREFIX: prefix };
    const count = Math.round(50_000 * SCALE);
    const spreadMs = Math.round(60_000 * SCALE);
    const consumer = () => fleet.spawn({ ...env, ROLE: 'consumer', PARALLELISM: '16', HANDLER_MS: '5' });
    for (let i = 0; i < 4; i++) await fleet.ready(consumer());
    const started = Date.now();
    fleet.spawn({ ...env, ROLE: 'producer', COUNT: String(count), SPREAD_MS: String(spreadMs) });

    let kills = 0;
    while (Date.now() - started < spreadMs) {
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const consumers = fleet.alive.filter((pid) => fleet.lines.some((l) => l.pid === pid && l.ready));
      await fleet.kill(consumers[Math.floor(Math.random() * consumers.length)]!);
      kills++;
      await fleet.ready(consumer());
    }
    const drainStarted = Date.now();
    await drainAndSettle(fleet, redis, prefix, 120_000);
    const ledger = checkLedger(fleet.lines, fleet.kills, await deadLettered(redis, prefix), [], LEASE_MS);
    // Time to recover: for each event a killed process had started but not finished, kill to its success elsewhere.
    let maxRecoveryMs = 0;
    for (const kill of fleet.kills) {
      const ended = new Set(fleet.lines.filter((l) => l.pid === kill.pid && l.ok).map((l) => l.ok!));
      const cut = fleet.lines.filter((l) => l.pid === kill.pid && l.start && !ended.has(l.start)).map((l) => l.start!);
      for (const id of cut) {
        const redone = fleet.lines.find((l) => l.ok === id && l.pid !== kill.pid);
        if (redone) maxRecoveryMs = Math.max(maxRecoveryMs, redone.at - kill.at);
      }
    }
    report('consumers killed', ledger, { kills, maxRecoveryMs, drainMs: Date.now() - drainStarted });
    expect(ledger.accepted).toBe(count);
    expect(ledger.lost).toEqual([]);
    expect(ledger.sameAttemptTwice).toEqual([]);
    expect(ledger.enqueuedTwice).toEqual([]);
  }, 600_000);

  it('2. Redis killed and restarted with AOF (appendfsync always) under producers and consumers', async () => {
    const { server, redis, fleet } = await scenario(['--appendonly', 'yes', '--appendfsync', 'always']);
    const prefix = 'restart';
    const env = { REDIS_URL: server.url, PREFIX: prefix };
    const count = Math.round(10_000 * SCALE);
    const consumers = [0, 1].map(() => fleet.spawn({ ...env, ROLE: 'consumer', PARALLELISM: '16', HANDLER_MS: '2' }));
    for (const pid of consumers) await fleet.ready(pid);
    fleet.spawn({ ...env, ROLE: 'producer', COUNT: String(count), SPREAD_MS: String(Math.round(20_000 * SCALE)) });

    // Killed once a quarter is handled: mid-run, however fast this machine is.
    await fleet.until(() => fleet.lines.filter((l) => l.ok).length >= count / 4, 'a quarter of the events handled', 60_000);
    const down = Date.now();
    await server.kill();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await server.restart();
    const up = Date.now();
    const okBefore = fleet.lines.filter((l) => l.ok).length;
    await fleet.until(() => fleet.lines.filter((l) => l.ok).length > okBefore, 'handling resumed', 30_000);
    const recoveredMs = Date.now() - up;

    await drainAndSettle(fleet, redis, prefix, 120_000);
    const ledger = checkLedger(fleet.lines, fleet.kills, await deadLettered(redis, prefix), [{ from: down, to: up }], LEASE_MS);
    report('redis restarted', ledger, { outageMs: up - down, recoveredMs });
    // Every process resumed by itself: none was restarted, all are still running.
    expect(consumers.every((pid) => fleet.alive.includes(pid))).toBe(true);
    expect(ledger.accepted).toBe(count);
    expect(ledger.lost).toEqual([]);
    expect(ledger.sameAttemptTwice).toEqual([]);
    expect(ledger.enqueuedTwice).toEqual([]);
  }, 600_000);

  it('3. Redis frozen (SIGSTOP 20 s), then every connection reset, then every connection black-holed: handling resumes each time', async () => {
    const { server, redis, fleet } = await scenario();
    const proxy = await TcpProxy.start(server.port);
    cleanups.push(async () => {
      if (server.pid) process.kill(server.pid, 'SIGCONT'); // a failed run must not leave it frozen
      await proxy.stop();
    });
    const prefix = 'cut';
    // The service instances reach Redis only through the proxy; short deadlines so a run stays short.
    const env = { REDIS_URL: proxy.url, PREFIX: prefix, COMMAND_TIMEOUT_MS: '3000' };
    const consumers = [0, 1].map(() => fleet.spawn({ ...env, ROLE: 'consumer', PARALLELISM: '16', HANDLER_MS: '2' }));
    for (const pid of consumers) await fleet.ready(pid);
    let batch = 0;
    /** A burst of new events from a fresh producer; resolves with how long until all are handled. */
    const burst = async (): Promise<number> => {
      const idPrefix = `b${batch++}-`;
      const from = Date.now();
      fleet.spawn({ ...env, ROLE: 'producer', COUNT: '200', SPREAD_MS: '0', ID_PREFIX: idPrefix });
      await fleet.until(() => fleet.lines.filter((l) => l.ok?.startsWith(idPrefix)).length >= 200, `burst ${idPrefix} handled`, 60_000);
      return Date.now() - from;
    };
    const figures: Record<string, number> = { baselineMs: await burst() };
    // When Redis was out of the instances' reach: a result (or start) sent then may never have arrived.
    const outages: Array<{ from: number; to: number }> = [];

    process.kill(server.pid!, 'SIGSTOP');
    const frozen = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 20_000 * Math.min(1, SCALE * 2)));
    process.kill(server.pid!, 'SIGCONT');
    outages.push({ from: frozen, to: Date.now() });
    figures.afterFreezeMs = await burst();

    const reset = Date.now();
    figures.connectionsReset = proxy.dropAll();
    outages.push({ from: reset, to: Date.now() });
    figures.afterResetMs = await burst();

    const blackholed = Date.now();
    figures.connectionsBlackholed = proxy.blackholeAll();
    figures.afterBlackholeMs = await burst();
    outages.push({ from: blackholed, to: Date.now() });

    await drainAndSettle(fleet, redis, prefix, 60_000);
    const ledger = checkLedger(fleet.lines, fleet.kills, await deadLettered(redis, prefix), outages, LEASE_MS);
    report('frozen and cut', ledger, figures);
    expect(consumers.every((pid) => fleet.alive.includes(pid))).toBe(true);
    expect(ledger.lost).toEqual([]);
    expect(ledger.sameAttemptTwice).toEqual([]);
    expect(ledger.enqueuedTwice).toEqual([]);
  }, 600_000);

  it('6. Redis runs enqueues whose replies are lost, hands their events out, and dies before answering: re-sent enqueues take effect once', async () => {
    const { server, redis, fleet } = await scenario(['--appendonly', 'yes', '--appendfsync', 'always']);
    const proxy = await TcpProxy.start(server.port);
    cleanups.push(() => proxy.stop());
    const prefix = 'lost';
    // The producer reaches Redis through the proxy, the consumers directly; each event is due as it is sent.
    const count = Math.round(6_000 * SCALE);
    const spreadMs = Math.round(12_000 * SCALE);
    const consumers = [0, 1].map(() => fleet.spawn({ REDIS_URL: server.url, PREFIX: prefix, ROLE: 'consumer', PARALLELISM: '16', HANDLER_MS: '1' }));
    for (const pid of consumers) await fleet.ready(pid);
    fleet.spawn({ REDIS_URL: proxy.url, PREFIX: prefix, ROLE: 'producer', COUNT: String(count), SPREAD_MS: String(spreadMs), PACED: '1', COMMAND_TIMEOUT_MS: '2000' });
    await fleet.until(() => fleet.lines.filter((l) => l.accepted).length >= count / 4, 'a quarter enqueued', 60_000);

    // From now on Redis runs what the producer sends and the producer hears nothing back,
    // while the consumers handle those events. Then Redis dies before any reply got out.
    proxy.loseRepliesOfConnectionsThatSent('EVAL');
    const lostFrom = Date.now();
    const okBefore = fleet.lines.filter((l) => l.ok).length;
    await fleet.until(() => fleet.lines.filter((l) => l.ok).length > okBefore + 20, 'events handled whose enqueues got no reply', 10_000);
    const down = Date.now();
    await server.kill();
    await server.restart();
    const up = Date.now();

    await drainAndSettle(fleet, redis, prefix, 120_000);
    const ledger = checkLedger(fleet.lines, fleet.kills, await deadLettered(redis, prefix), [{ from: lostFrom, to: up }], LEASE_MS);
    const resentDuplicates = fleet.lines.filter((l) => l.accepted && l.resent && l.status === 'duplicate').length;
    report('replies lost, then Redis killed', ledger, { outageMs: up - down, resent: fleet.lines.filter((l) => l.resent).length, resentDuplicates });
    expect(ledger.accepted).toBe(count);
    expect(ledger.lost).toEqual([]);
    // Re-sends of enqueues whose events were already handled found them marked, and stored nothing.
    expect(resentDuplicates).toBeGreaterThan(0);
    expect(ledger.enqueuedTwice).toEqual([]);
    expect(ledger.sameAttemptTwice).toEqual([]);
  }, 600_000);

  it('7. fan-out: two groups of two consumer processes, one killed with SIGKILL every few seconds: every accepted event handled in every group', async () => {
    const { server, redis, fleet } = await scenario();
    const prefix = 'fan';
    const env = { REDIS_URL: server.url, PREFIX: prefix };
    const count = Math.round(10_000 * SCALE);
    const spreadMs = Math.round(20_000 * SCALE);
    const groups = ['billing', 'audit'];
    const consumer = (group: string) => fleet.spawn({ ...env, ROLE: 'consumer', GROUP: group, PARALLELISM: '16', HANDLER_MS: '2' });
    for (const group of groups) for (let i = 0; i < 2; i++) await fleet.ready(consumer(group));
    await fleet.until(async () => (await redis.hlen(`${TYPE_KEYS(prefix)}:groups`)) === 2, 'both groups registered', 10_000);
    const started = Date.now();
    fleet.spawn({ ...env, ROLE: 'producer', COUNT: String(count), SPREAD_MS: String(spreadMs) });

    let kills = 0;
    while (Date.now() - started < spreadMs) {
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      const victims = fleet.alive.filter((pid) => fleet.lines.some((l) => l.pid === pid && l.ready) && fleet.lines.some((l) => l.pid === pid && l.start));
      const victim = victims[Math.floor(Math.random() * victims.length)];
      if (victim === undefined) continue;
      const group = fleet.lines.find((l) => l.pid === victim && l.group)!.group!;
      await fleet.kill(victim);
      kills++;
      await fleet.ready(consumer(group));
    }
    await drainAndSettle(fleet, redis, prefix, 120_000);
    const accepted = fleet.lines.filter((l) => l.accepted);
    for (const group of groups) {
      const lines = [...accepted, ...fleet.lines.filter((l) => l.group === group)];
      const dead = new Set(await redis.zrange(`${TYPE_KEYS(prefix)}:g:${group}:d`, '0', '-1'));
      const ledger = checkLedger(lines, fleet.kills, dead, [], LEASE_MS);
      report(`fan-out, group ${group}`, ledger, { kills });
      expect(ledger.accepted).toBe(count);
      expect(ledger.lost).toEqual([]);
      expect(ledger.sameAttemptTwice).toEqual([]);
      expect(ledger.enqueuedTwice).toEqual([]);
    }
  }, 600_000);

  it('5. close() while 1,000 handlers run, repeated: nothing lost, no handler started after close resolved', async () => {
    const { server, redis, fleet } = await scenario();
    const prefix = 'close';
    const env = { REDIS_URL: server.url, PREFIX: prefix };
    const rounds = 5;
    fleet.spawn({ ...env, ROLE: 'producer', COUNT: String(rounds * 1_000 + 1_000), SPREAD_MS: '0' });
    await fleet.until(() => fleet.lines.some((l) => l.produced !== undefined), 'all events stored', 60_000);
    for (let round = 0; round < rounds; round++) {
      const pid = fleet.spawn({ ...env, ROLE: 'consumer', PARALLELISM: '1000', HANDLER_MS: '300' });
      await fleet.ready(pid);
      const running = () => fleet.lines.filter((l) => l.pid === pid && l.start).length - fleet.lines.filter((l) => l.pid === pid && l.ok).length;
      await fleet.until(() => running() >= 1_000, `1,000 handlers running in round ${round + 1}`, 30_000);
      await fleet.kill(pid, 'SIGTERM'); // the worker calls close() and exits when it resolves
      // Its last line may be read just after it ended.
      const saidClosed = () => fleet.lines.some((l) => l.pid === pid && (l.closed || l.crashed));
      await fleet.until(saidClosed, `round ${round + 1}: the worker's last line`, 5_000).catch(() => undefined);
      const closed = fleet.lines.findIndex((l) => l.pid === pid && l.closed);
      const how = () => JSON.stringify({ exit: fleet.exits.get(pid), crashed: fleet.lines.find((l) => l.pid === pid && l.crashed)?.crashed });
      expect(closed, `round ${round + 1}: the worker ended without closing: ${how()}`).toBeGreaterThan(-1);
      // Every handler it started finished before close resolved, and none started after.
      expect(running()).toBe(0);
      expect(fleet.lines.slice(closed).some((l) => l.pid === pid && l.start)).toBe(false);
    }
    fleet.spawn({ ...env, ROLE: 'consumer', PARALLELISM: '100' });
    await drainAndSettle(fleet, redis, prefix, 60_000);
    const ledger = checkLedger(fleet.lines, fleet.kills, await deadLettered(redis, prefix), [], LEASE_MS);
    report('close under load', ledger, { rounds });
    expect(ledger.lost).toEqual([]);
    expect(ledger.duplicates).toBe(0);
  }, 600_000);

  it('8. replaces and cancels under load while consumers are killed with SIGKILL: the last stored payload of every id is handled', async () => {
    const { server, redis, fleet } = await scenario();
    const prefix = 'mutate';
    // No idempotency window: a cancelled id may be enqueued again at once.
    const env = { REDIS_URL: server.url, PREFIX: prefix, IDEMPOTENCY_WINDOW_MS: '0' };
    const count = Math.max(100, Math.round(2_000 * SCALE));
    const spreadMs = Math.max(5_000, Math.round(20_000 * SCALE));
    // Handlers long enough that replaces and cancels meet calls still running the old payload.
    // Half the first attempts fail: a stale result must not take the retry of the payload that replaced it.
    const consumer = () => fleet.spawn({ ...env, ROLE: 'consumer', PARALLELISM: '16', HANDLER_MS: '60', FAIL_FIRST: '0.5' });
    for (let i = 0; i < 3; i++) await fleet.ready(consumer());
    fleet.spawn({ ...env, ROLE: 'mutator', COUNT: String(count), MUTATIONS: String(Math.round(count / 4)), SPREAD_MS: String(spreadMs) });
    let kills = 0;
    while (!fleet.lines.some((l) => l.mutated !== undefined)) {
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const consumers = fleet.alive.filter((pid) => fleet.lines.some((l) => l.pid === pid && l.ready));
      if (consumers.length < 2) continue;
      await fleet.kill(consumers[Math.floor(Math.random() * consumers.length)]!);
      kills++;
      await fleet.ready(consumer());
    }
    await fleet.until(async () => (await redis.hlen(`${TYPE_KEYS(prefix)}:m`)) === 0, 'every event completed', 120_000);

    // The last version the mutator stored of each id, and every version a handler finished.
    const last = new Map<string, number>();
    for (const l of fleet.lines) if (l.stored !== undefined && l.status !== 'duplicate') last.set(l.stored, l.v!);
    const finished = new Set(fleet.lines.filter((l) => l.ok !== undefined).map((l) => `${l.ok}@${l.v}`));
    const lost = [...last].filter(([id, v]) => !finished.has(`${id}@${v}`)).map(([id, v]) => `${id}@${v}`);
    const replaced = fleet.lines.filter((l) => l.stored !== undefined && l.v! > 1).length;
    console.log(`FIGURES replaces and cancels: ${JSON.stringify({ ids: last.size, changes: replaced, kills, lost: lost.length, dead: (await deadLettered(redis, prefix)).size })}`);
    expect(last.size).toBe(count);
    expect(lost).toEqual([]);
    expect([...(await deadLettered(redis, prefix))]).toEqual([]);
  }, 600_000);
});
