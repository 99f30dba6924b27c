import type { Cluster, Redis } from 'ioredis';
import { RedisConnectionError, classifyRedisError, describe } from '../core/errors';
import type { RedisClient } from './redis-client';
import { LUA_SOURCES } from './lua-sources.generated';
import { type ReadyGate, isUnsent, whenReady } from './ready-gate';

/** Between PINGs that failed at once (a closed connection), while waiting for Redis. */
const RETRY_MS = 100;

/** Whether the client was set up to speak TLS (a rediss:// URL, or `tls` options). */
function usesTls(client: RedisClient): boolean {
  const options = (client as { options?: { tls?: unknown; redisOptions?: { tls?: unknown } } }).options;
  return Boolean(options?.tls ?? options?.redisOptions?.tls);
}

/** Resolves `promise`, or undefined once `ms` passed. */
function within<T>(promise: Promise<T>, ms: number): Promise<{ value: T } | undefined> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(undefined), Math.max(0, ms));
    timer.unref();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve({ value });
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/** Whether Redis answers a PING within `ms`. */
/** One PING: what the service's log probes an outage with. */
export function ping(client: RedisClient): Promise<unknown> {
  return client.ping();
}

export async function pingWithin(client: RedisClient, ms: number, ready: () => Promise<void> | undefined = () => whenReady(client, ms)): Promise<boolean> {
  try {
    const startedAt = performance.now();
    // The service's connections keep no offline queue: a PING waits for the connection, within the same bound.
    const waiting = ready();
    if (waiting && (await within(waiting, ms)) === undefined) return false;
    return (await within(client.ping(), ms - (performance.now() - startedAt))) !== undefined;
  } catch {
    return false;
  }
}

/**
 * Waits until Redis answers a PING and holds every script of lua/ (SCRIPT
 * LOAD on each master), or fails with a RedisConnectionError after `timeoutMs`:
 * at once for refused credentials, else with the reason the last connection
 * error gives ('refused', 'tls', ...), or 'timeout'.
 */
export async function waitForRedis(client: RedisClient, timeoutMs: number, gate?: ReadyGate): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  const refused = () => {
    const refusal = gate?.refusal;
    if (refusal) throw new RedisConnectionError('other', refusal.message);
  };
  refused();
  let lastError: unknown;
  let connected = client.status === 'ready' || client.status === 'connect';
  const onError = (error: unknown) => (lastError = error);
  const onConnect = () => (connected = true);
  client.on('error', onError);
  client.on('connect', onConnect);
  client.on('ready', onConnect);
  try {
    let ping: Promise<unknown> | undefined;
    for (;;) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      refused();
      ping ??= client.ping();
      try {
        if ((await within(ping, left)) !== undefined) {
          await loadScripts(client, deadline);
          return;
        }
      } catch (error) {
        if (error instanceof RedisConnectionError) throw error;
        // A PING not sent (the connection is not up yet; it keeps no offline queue) says nothing:
        // the connection's own error, if any, says why.
        if (!isUnsent(error)) lastError = error;
        if (lastError !== undefined && classifyRedisError(lastError) === 'auth') throw connectionError('auth', lastError);
        ping = undefined;
        await new Promise((resolve) => setTimeout(resolve, Math.min(RETRY_MS, Math.max(0, deadline - performance.now()))).unref());
      }
    }
  } finally {
    client.off('error', onError);
    client.off('connect', onConnect);
    client.off('ready', onConnect);
  }
  let reason = lastError === undefined ? 'timeout' : classifyRedisError(lastError);
  // A TLS client talking to a plain port often sees no error at all: the handshake just never completes.
  if ((reason === 'timeout' || reason === 'other') && usesTls(client) && !connected) reason = 'tls';
  throw connectionError(reason, lastError, timeoutMs);
}

function connectionError(reason: ReturnType<typeof classifyRedisError>, cause: unknown, timeoutMs?: number): RedisConnectionError {
  const detail =
    reason === 'auth'
      ? `Redis refused the credentials (${cause instanceof Error ? cause.message.split(' ')[0] : 'auth'}); check the user and password in the URL or client`
      : reason === 'tls'
        ? `no TLS connection within ${timeoutMs} ms${cause === undefined ? '' : ` (${describe(cause)})`}; a rediss:// URL needs a TLS port, and its certificate must be trusted`
        : reason === 'refused'
          ? `nothing accepted the connection within ${timeoutMs} ms (${describe(cause)}); is Redis running on that host and port?`
          : `Redis did not answer within ${timeoutMs} ms${cause === undefined ? '' : ` (last error: ${describe(cause)})`}`;
  return new RedisConnectionError(reason, detail, cause === undefined ? undefined : { cause });
}

async function loadScripts(client: RedisClient, deadline: number): Promise<void> {
  const masters: Redis[] = client.isCluster ? (client as Cluster).nodes('master') : [client as Redis];
  const loads = masters.flatMap((master) => Object.values(LUA_SOURCES).map((script) => master.script('LOAD', script.lua)));
  try {
    const loaded = await within(Promise.all(loads), deadline - performance.now());
    if (loaded === undefined) throw connectionError('timeout', undefined, 0);
  } catch (error) {
    if (error instanceof RedisConnectionError) throw error;
    // A user without +script: each script is sent with EVAL on its first NOSCRIPT instead (README's ACL).
    if (classifyRedisError(error) === 'permission') return;
    throw connectionError(classifyRedisError(error), error);
  }
}
