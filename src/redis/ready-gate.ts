import { DelayedEventError, RedisConnectionError, classifyRedisError, describe } from '../core/errors';
import type { RedisClient } from './redis-client';
import { DatabaseRefusedError } from './redis-connections';

/**
 * How long a call waits for a connection that is not ready (connecting at
 * start-up, or reconnecting) before it fails. The service's own connections
 * keep no offline queue (src/redis/redis-connections.ts): a call is sent only
 * once the connection is ready, and one that gave up here was never sent, so
 * it cannot take effect later, after its caller was told it failed.
 */
export const READY_WAIT_MS = 1_000;

/** ioredis's refusal to send on a connection that is not writable, with no offline queue: the call was never sent. */
export function isUnsent(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("Stream isn't writeable");
}

/** Node's codes for a socket that failed or closed under a call. */
const SOCKET_FAILURES = new Set([
  'ECONNRESET',
  'EPIPE',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ERR_STREAM_DESTROYED',
  'ERR_SOCKET_CLOSED',
]);

/**
 * A failure of the connection under a call (not writeable, closed, reset,
 * reconnecting, a cluster with no reachable node), as the DelayedEventError
 * every public call promises (RedisConnectionError). Anything else is
 * returned as it is: the library's own errors, Redis's own reply errors
 * (OOM, NOPERM, a redirection: docs/api.md, "Errors") and what user code threw.
 */
export function typedConnectionError(error: unknown, call: string): unknown {
  if (!(error instanceof Error) || error instanceof DelayedEventError) return error;
  if (isUnsent(error)) return new RedisConnectionError('other', `the connection was being made again when ${call} was sent; nothing was sent`, { cause: error });
  const code = String((error as { code?: unknown }).code ?? '');
  const failed =
    SOCKET_FAILURES.has(code) ||
    error.message.startsWith('Connection is closed') ||
    error.name === 'MaxRetriesPerRequestError' ||
    error.name === 'ClusterAllFailedError' ||
    /^(Failed to refresh slots cache|None of startup nodes is available|Cluster isn't ready|Cluster is disconnected)/.test(error.message);
  if (!failed) return error;
  const reason = classifyRedisError(error);
  return new RedisConnectionError(
    reason === 'permission' || reason === 'auth' ? 'other' : reason,
    `the connection failed during ${call} (${describe(error)}); it may have run, and enqueueing again is safe`,
    {
      cause: error,
    },
  );
}

/**
 * Holds calls until their connection is ready, and knows why it is not: the
 * last connection error since it was last ready ('refused' while nothing
 * accepts connections), even one that came before the call.
 */
export class ReadyGate {
  private lastError: unknown;
  /** The wait under way, shared by every call made meanwhile: one set of listeners on the client, however many calls wait. */
  private waiting: Promise<void> | undefined;
  private reconnecting: Promise<void> | undefined;

  constructor(
    private readonly client: RedisClient,
    private readonly maxMs = READY_WAIT_MS,
    /** Told each time the connection is ready again (after a reconnect). */
    onReady: () => void = () => undefined,
  ) {
    client.on('error', (error: unknown) => {
      if (!(this.lastError instanceof DatabaseRefusedError)) this.lastError = error;
    });
    client.on('ready', () => {
      if (!(this.lastError instanceof DatabaseRefusedError)) this.lastError = undefined;
      onReady();
    });
  }

  /** Set once Redis refused the database the URL selects: the connection stopped for good. */
  get refusal(): DatabaseRefusedError | undefined {
    return this.lastError instanceof DatabaseRefusedError ? this.lastError : undefined;
  }

  /**
   * Undefined when the connection is ready (the usual case: nothing to wait
   * for); otherwise a promise that resolves once it is, or rejects after
   * `maxMs` with a RedisConnectionError saying why, nothing sent.
   */
  wait(): Promise<void> | undefined {
    // Final: the connection stopped for good, and must not be used whatever its status says.
    if (this.lastError instanceof DatabaseRefusedError) return Promise.reject(new RedisConnectionError('other', this.lastError.message));
    if (this.client.status === 'ready') return undefined;
    if (this.waiting) return this.waiting;
    const waiting = whenReady(this.client, this.maxMs, this.lastError);
    if (!waiting) return undefined;
    this.waiting = waiting;
    const clear = () => {
      if (this.waiting === waiting) this.waiting = undefined;
    };
    waiting.then(clear, clear);
    return waiting;
  }

  /** After a call came back unsent (the connection is closing though its status still says ready): waits for it to be back. */
  next(): Promise<void> {
    if (this.reconnecting) return this.reconnecting;
    const reconnecting = nextReady(this.client, this.maxMs);
    this.reconnecting = reconnecting;
    const clear = () => {
      if (this.reconnecting === reconnecting) this.reconnecting = undefined;
    };
    reconnecting.then(clear, clear);
    return reconnecting;
  }
}

/**
 * After a call came back unsent (isUnsent: the connection is closing though
 * its status still says ready), waits for it to be ready again, within `maxMs`.
 */
export function nextReady(client: RedisClient, maxMs = READY_WAIT_MS): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const settle = (error?: unknown) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      if (error) reject(error);
      else resolve();
    };
    const onReady = () => settle();
    const timer = setTimeout(() => settle(new RedisConnectionError('other', `the connection to Redis closed and was not back within ${maxMs} ms; nothing was sent`)), maxMs);
    client.on('ready', onReady);
  });
}

/**
 * Undefined when `client` is ready (the usual case: nothing to wait for);
 * otherwise a promise that resolves once it is, or rejects after `maxMs`
 * with a RedisConnectionError whose reason is the last connection error's
 * ('refused' while nothing accepts connections), or 'timeout'. `knownError`:
 * the connection's last error before the call, if known.
 */
export function whenReady(client: RedisClient, maxMs = READY_WAIT_MS, knownError?: unknown): Promise<void> | undefined {
  if (client.status === 'ready') return undefined;
  return new Promise<void>((resolve, reject) => {
    let lastError: unknown = knownError;
    const done = () => {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('error', onError);
      client.off('end', onEnd);
    };
    const onReady = () => {
      done();
      resolve();
    };
    const fail = (reason: ReturnType<typeof classifyRedisError>, detail: string) => {
      done();
      reject(new RedisConnectionError(reason, detail, lastError === undefined ? undefined : { cause: lastError }));
    };
    const onError = (error: unknown) => {
      if (lastError instanceof DatabaseRefusedError) return;
      lastError = error;
      if (error instanceof DatabaseRefusedError) fail('other', error.message);
      // Refused credentials will be refused again: no point waiting out the bound.
      if (classifyRedisError(error) === 'auth') fail('auth', `Redis refused the credentials (${describe(error)}); check the user and password in the URL or client; nothing was sent`);
    };
    const onEnd = () => fail('other', `the connection was closed${lastError === undefined ? '' : ` (${describe(lastError)})`}; nothing was sent`);
    const timer = setTimeout(() => {
      const reason = lastError === undefined ? 'timeout' : classifyRedisError(lastError);
      const why = lastError === undefined ? 'it is still connecting' : describe(lastError);
      fail(reason === 'other' ? 'timeout' : reason, `no connection to Redis within ${maxMs} ms (${why}); nothing was sent, so nothing will be stored later`);
    }, maxMs);
    client.on('ready', onReady);
    client.on('error', onError);
    client.on('end', onEnd);
    if (client.status === 'end') onEnd();
    // A client made with lazyConnect connects on its first command, which this gate holds back.
    else if (client.status === 'wait') client.connect().catch(() => undefined);
  });
}
