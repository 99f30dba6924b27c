import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { UnansweredError, UsageError } from './parse';

export interface ConnectionOptions {
  /** redis:// or rediss:// URL; else REDIS_URL. */
  readonly redis?: string;
  /** Treat the URL's host:port as a startup node of a Redis Cluster. */
  readonly cluster?: boolean;
  /** Startup nodes of a Redis Cluster, `host:port,host:port` (implies --cluster). */
  readonly nodes?: string;
}

/** How long the CLI tries to reach Redis before it gives up (exit 2). */
export const CONNECT_TIMEOUT_MS = 3_000;

/**
 * Connects, or throws a UsageError saying what to fix (an UnansweredError when Redis stays silent) within `timeoutMs`: no
 * retries in the background, so a wrong address never leaves the CLI hanging.
 * A `persistent` connection (the dashboard, which runs for hours) must first
 * connect the same way, then reconnects after an outage as ioredis does.
 */
export async function connect(options: ConnectionOptions, env: NodeJS.ProcessEnv = process.env, timeoutMs = CONNECT_TIMEOUT_MS, persistent = false): Promise<Redis | Cluster> {
  const url = options.redis ?? env.REDIS_URL;
  if (!url && !options.nodes) throw new UsageError('no Redis to connect to: pass --redis redis://host:port (or set REDIS_URL), or --nodes host:port,... for a Cluster');
  let parsed: URL | undefined;
  if (url) {
    try {
      parsed = new URL(url);
    } catch {
      throw new UsageError(`--redis ${JSON.stringify(url)} is not a URL: use redis://[user:password@]host:port[/db] (rediss:// for TLS)`);
    }
    if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw new UsageError(`--redis ${JSON.stringify(url)} must start with redis:// or rediss://`);
    // ioredis would take a missing host for 127.0.0.1:6379, and a bad database for database 0.
    if (parsed.hostname === '') throw new UsageError(`--redis ${JSON.stringify(url)} names no host: use redis://host:port`);
    if (!/^\/?(\d{1,5})?$/.test(parsed.pathname)) throw new UsageError(`--redis ${JSON.stringify(url)}: the path must be a database number, such as /0`);
  }
  const db = parsed ? Number(parsed.pathname.replace('/', '') || '0') : 0;
  const base: RedisOptions = {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    ...(persistent ? {} : { maxRetriesPerRequest: 1, retryStrategy: () => null }),
    ...(parsed?.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed?.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed?.protocol === 'rediss:' ? { tls: {} } : {}),
  };
  let client: Redis | Cluster;
  let where: string;
  if (options.nodes || options.cluster) {
    const nodes: Array<{ host: string; port: number }> = options.nodes
      ? options.nodes.split(',').map((node) => parseNode(node.trim()))
      : [{ host: parsed!.hostname, port: Number(parsed!.port || 6379) }];
    where = `the Cluster at ${nodes.map((n) => `${n.host}:${n.port}`).join(', ')}`;
    client = new Cluster(nodes, { lazyConnect: true, ...(persistent ? {} : { clusterRetryStrategy: () => null }), slotsRefreshTimeout: timeoutMs, redisOptions: base });
  } else {
    where = `${parsed!.protocol}//${parsed!.host}`;
    client = new Redis(url!, base);
  }
  // Reported through connect()'s rejection; without a listener ioredis would print each. The last one
  // says why: ioredis rejects connect() with 'Connection is closed.' once it gives up.
  let cause: Error | undefined;
  client.on('error', (error: Error) => (cause = error));
  let timer: NodeJS.Timeout | undefined;
  const unanswered = new Error(`no answer within ${timeoutMs / 1_000} s`);
  try {
    await Promise.race([
      client.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(unanswered), timeoutMs);
      }),
    ]);
    // ioredis selects the URL's database on connect, and on refusal goes on in database 0: ask again, and stop if it is refused.
    if (db > 0 && !(options.nodes || options.cluster)) {
      try {
        await (client as Redis).select(db);
      } catch (error) {
        throw new Error(`database ${db} does not exist there (${(error as Error).message})`);
      }
    }
    return client;
  } catch (error) {
    client.disconnect();
    const hint = options.nodes || options.cluster ? 'check --redis / --nodes, and that it is a Cluster' : 'check --redis or REDIS_URL (use --cluster for a Redis Cluster)';
    const message = `cannot connect to ${where}: ${why(error as Error, cause)}; ${hint}`;
    // Silent (frozen, or a black hole on the way): given up on like a command that got no answer. Refused: a wrong address.
    const timedOut = (e: Error | undefined) => e !== undefined && ((e as NodeJS.ErrnoException).code === 'ETIMEDOUT' || /\bETIMEDOUT\b/.test(e.message));
    const silent = (error === unanswered && (cause === undefined || timedOut(cause))) || timedOut(error as Error);
    throw silent ? new UnansweredError(message) : new UsageError(message);
  } finally {
    clearTimeout(timer);
  }
}

function parseNode(text: string): { host: string; port: number } {
  const match = /^(.+):(\d+)$/.exec(text);
  if (!match) throw new UsageError(`--nodes takes host:port,host:port; cannot read ${JSON.stringify(text)}`);
  return { host: match[1]!.replace(/^\[(.*)\]$/, '$1'), port: Number(match[2]) };
}

/** Why a connection failed, in words: refused, credentials, time, or what Redis or the network said. */
function why(error: Error, cause: Error | undefined): string {
  // ioredis gives up with a message that says nothing ('Connection is closed.'); the last error event says why.
  const generic = /^Connection is closed\.?$|^Reached the max retries/.test(error.message);
  const source = generic && cause ? cause : error;
  const text = `${(source as NodeJS.ErrnoException).code ?? ''} ${source.message}`;
  if (/WRONGPASS|NOAUTH|invalid username-password|AUTH failed/i.test(text)) return `Redis refused the credentials (${source.message.split('\n')[0]})`;
  if (/ECONNREFUSED/.test(text)) return 'connection refused: nothing listens there';
  if (/ENOTFOUND|EAI_AGAIN/.test(text)) return 'no such host';
  if (/EHOSTUNREACH|ENETUNREACH/.test(text)) return 'the host cannot be reached';
  if (generic && !cause) return 'the connection closed before Redis answered';
  return source.message;
}
