import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { Inspector } from '../index';
import { type DashboardAuth, createDashboard } from '../dashboard/index';
import { UsageError } from './parse';

export interface DashboardCommandOptions {
  readonly port: number;
  readonly host: string;
  readonly readOnly: boolean;
  readonly auth: DashboardAuth | undefined;
  /** More host names it answers to (--allow-host), e.g. the name of a reverse proxy in front of it. */
  readonly allowHosts: readonly string[];
  /** Resolves when the user asks to stop (SIGINT, SIGTERM). */
  readonly stopped: Promise<void>;
  readonly out: (text: string) => void;
  readonly warn: (text: string) => void;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** `--basic-auth user:password` (or $DELAYED_EVENTS_DASHBOARD_BASIC_AUTH), `--token` (or $DELAYED_EVENTS_DASHBOARD_TOKEN). */
export function authFrom(token: string | undefined, basic: string | undefined): DashboardAuth | undefined {
  if (token !== undefined && basic !== undefined) throw new UsageError('give --token or --basic-auth, not both');
  if (token !== undefined) {
    if (token.length < 16) throw new UsageError('--token must be at least 16 characters (try: openssl rand -hex 16)');
    return { token };
  }
  if (basic !== undefined) {
    const colon = basic.indexOf(':');
    if (colon <= 0 || colon === basic.length - 1) throw new UsageError('--basic-auth takes user:password');
    return { basic: { username: basic.slice(0, colon), password: basic.slice(colon + 1) } };
  }
  return undefined;
}

/** Serves the dashboard until `stopped` resolves. */
export async function serveDashboard(service: Inspector, options: DashboardCommandOptions): Promise<void> {
  // The address it listens on is a name it answers to (every interface's, for 0.0.0.0 or ::);
  // loopback names always are, without auth. With auth and no --allow-host, every name is.
  const bound = ['0.0.0.0', '::'].includes(options.host) ? Object.values(networkInterfaces()).flatMap((addresses) => (addresses ?? []).map((a) => a.address)) : [options.host];
  const allowedHosts = options.auth && options.allowHosts.length === 0 ? undefined : [...bound, ...options.allowHosts];
  const handler = createDashboard(service, { readOnly: options.readOnly, auth: options.auth, ...(allowedHosts ? { allowedHosts } : {}) });
  const server = createServer(handler);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new UsageError(error.code === 'EADDRINUSE' ? `port ${options.port} is taken: pass --port` : `cannot listen on ${options.host}:${options.port}: ${error.message}`)),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  if (!LOOPBACK.has(options.host) && !options.auth) options.warn(`the dashboard listens on ${options.host} without --token or --basic-auth: anybody who reaches the port can use it`);
  options.out(`dashboard for prefix '${service.prefix}' on http://${host}:${port}/${options.readOnly ? ' (read-only)' : ''}; Ctrl-C to stop`);
  await options.stopped;
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
