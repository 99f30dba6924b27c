import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Observable, type Subscription, catchError, defer, exhaustMap, map, of, share, timer } from 'rxjs';
import { InvalidOptionError } from '../index';
import { type DashboardSource, type Overview, asHttpError, readOverview, typeRoute } from './dashboard-api';
import { HttpError, SECURITY_HEADERS, sendError, sendJson, within } from './http-io';
import { type DashboardAuth, TOKEN_COOKIE, checkAction, checkAllowedHosts, checkAuthOption, checkCredentials, checkHost } from './request-guard';
import { APP_CSS, APP_JS } from './ui-assets.generated';

export interface DashboardOptions {
  /** The path it is mounted under in your server, e.g. `/ops/events` (default: the root). Not needed where the framework strips the mount path (Express `app.use`). */
  readonly basePath?: string;
  /** Hides every action and refuses it with 403. */
  readonly readOnly?: boolean;
  /** Without it anybody who can reach the port can use the dashboard. */
  readonly auth?: DashboardAuth;
  /** How often the live overview (types and counts) is read and pushed to open pages; default 2 s. */
  readonly refreshMs?: number;
  /** Longest a request waits for Redis before it is answered 503; default 10 s. */
  readonly timeoutMs?: number;
  /**
   * Host names (without port) the dashboard answers to, besides loopback ones
   * when it has no auth. Without auth and without this, only `localhost`,
   * `127.0.0.1` and `[::1]`: a web page that rebinds its own name to your
   * loopback address is refused. With auth and without this, every name.
   */
  readonly allowedHosts?: readonly string[];
}

/** A Node request handler; `next` (Express, Connect) is not called: every path under the base path is the dashboard's. */
export type DashboardHandler = (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void;

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Delayed events</title>
<link rel="icon" href="assets/icon.svg">
<link rel="stylesheet" href="assets/app.css">
<script src="assets/app.js" defer></script>
</head>
<body><div id="app"></div></body>
</html>`;

const ASSETS: Readonly<Record<string, { type: string; body: string }>> = {
  'assets/app.js': { type: 'text/javascript; charset=utf-8', body: APP_JS },
  'assets/app.css': { type: 'text/css; charset=utf-8', body: APP_CSS },
  // The page's icon, served here: no favicon.ico request answered 404 on every page.
  'assets/icon.svg': {
    type: 'image/svg+xml',
    body: '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="7" fill="#065f46"/><path d="M8 4v4l3 2" stroke="#fff" stroke-width="1.6" fill="none"/></svg>',
  },
};

function normalizedBase(basePath: string | undefined): string {
  if (basePath === undefined || basePath === '' || basePath === '/') return '';
  if (typeof basePath !== 'string' || !/^(\/[A-Za-z0-9._~-]+)+\/?$/.test(basePath)) throw new InvalidOptionError('basePath', `must be a path such as /ops/events, got ${JSON.stringify(basePath)}`);
  return basePath.replace(/\/$/, '');
}

const HOUR_MS = 3_600_000;

/** A duration option from 100 ms up to `max`: longer ones would wait past what a timer takes, or poll in a busy loop. */
function msWithin(name: string, value: number, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 100 || value > max) {
    throw new InvalidOptionError(name, `must be from 100 to ${max} ms, got ${String(value)}`);
  }
  return value;
}

/** createDashboard's options, each once (the type checker holds the list to DashboardOptions): a misspelt one must not pass unnoticed. */
const OPTION_KEYS = { basePath: true, readOnly: true, auth: true, refreshMs: true, timeoutMs: true, allowedHosts: true } as const satisfies Record<keyof Required<DashboardOptions>, true>;

/**
 * The dashboard (docs/api.md, "Dashboard"): a page, its built script and
 * styles, and a JSON API on the service's inspection calls, guarded by
 * `auth`, with actions refused in read-only mode and from other sites.
 */
export function createDashboard(source: DashboardSource, options: DashboardOptions = {}): DashboardHandler {
  const allowed = Object.keys(OPTION_KEYS);
  if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', `must be an object such as { ${allowed.join(', ')} }`);
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) throw new InvalidOptionError(JSON.stringify(key), `createDashboard has no such option; its options are ${allowed.join(', ')}`);
  }
  const base = normalizedBase(options.basePath);
  const auth = checkAuthOption(options.auth);
  const allowedHosts = checkAllowedHosts(options.allowedHosts);
  const readOnly = options.readOnly === true;
  const refreshMs = msWithin('refreshMs', options.refreshMs ?? 2_000, HOUR_MS);
  const timeoutMs = msWithin('timeoutMs', options.timeoutMs ?? 10_000, HOUR_MS);

  // One reading of the overview per interval, shared by every open page; none while no page is open.
  const overview$: Observable<Overview | { error: string }> = timer(0, refreshMs).pipe(
    exhaustMap(() => defer(() => within(timeoutMs, readOverview(source, readOnly), false)).pipe(catchError((error: unknown) => of({ error: error instanceof Error ? error.message : String(error) })))),
    share(),
  );

  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    checkHost(req, allowedHosts, auth !== undefined);
    const target = req.url ?? '/';
    // '//host/…' would read as another host's address, and a redirect built from it would lead there.
    if (target.startsWith('//')) throw new HttpError(404, 'no-route', 'nothing at that path');
    const url = new URL(target.startsWith('/') ? target : new URL(target).pathname + new URL(target).search, 'http://dashboard.invalid');
    let path = url.pathname;
    if (base && (path === base || path.startsWith(`${base}/`))) path = path.slice(base.length);
    const isPage = path === '' || path === '/' || path === '/index.html';
    // A ?token= opens the page once (then lives in a cookie); API calls and actions take it only from the header or cookie.
    const token = isPage ? (url.searchParams.get('token') ?? undefined) : undefined;
    checkCredentials(req, auth, token);
    const method = req.method ?? 'GET';

    if (isPage) {
      if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, 'method', 'the page is read with GET');
      // Where the page is, as the browser sees it (Express mounts keep it in originalUrl), as a
      // same-origin path of safe characters only: it goes into Location and Set-Cookie.
      const shown = (req as { originalUrl?: string }).originalUrl ?? target;
      const shownPath = safePath(shown.startsWith('/') ? shown.split('?')[0]! : url.pathname);
      if (token !== undefined && auth && 'token' in auth) {
        // Keep the token out of the address bar and history: it lives in a cookie from now on.
        res.writeHead(303, {
          ...SECURITY_HEADERS,
          location: shownPath.endsWith('/') ? shownPath : `${shownPath}/`,
          'set-cookie': `${TOKEN_COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=${shownPath.replace(/\/(index\.html)?$/, '') || '/'}`,
        });
        res.end();
        return;
      }
      // Relative asset and API URLs resolve against the page only when it ends in a slash.
      if (!shownPath.endsWith('/') && !shownPath.endsWith('/index.html')) {
        res.writeHead(301, { ...SECURITY_HEADERS, location: `${shownPath}/` });
        res.end();
        return;
      }
      res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end(method === 'HEAD' ? undefined : PAGE);
      return;
    }

    const asset = ASSETS[path.slice(1)];
    if (asset) {
      res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': asset.type, 'cache-control': 'no-cache' });
      res.end(method === 'HEAD' ? undefined : asset.body);
      return;
    }

    if (!path.startsWith('/api/')) throw new HttpError(404, 'no-route', `nothing at ${path}`);
    const segments = path.slice(5).split('/').map(decodeSegment);
    if (method === 'POST') {
      if (readOnly) throw new HttpError(403, 'read-only', 'this dashboard is read-only');
      checkAction(req);
    } else if (method !== 'GET') {
      throw new HttpError(405, 'method', 'the API takes GET to read and POST to act');
    }

    const [section, ...rest] = segments;
    const answer = (work: Promise<unknown>) => within(timeoutMs, work, method === 'POST');
    if (method === 'GET' && section === 'overview' && rest.length === 0) return sendJson(res, 200, await answer(readOverview(source, readOnly)));
    if (method === 'GET' && section === 'health' && rest.length === 0) return sendJson(res, 200, await answer(source.health()));
    if (method === 'GET' && section === 'schedules' && rest.length === 0) return sendJson(res, 200, await answer(source.schedules().then((schedules) => ({ schedules }))));
    if (method === 'GET' && section === 'instances' && rest.length === 0) return sendJson(res, 200, await answer(source.instances().then((instances) => ({ instances }))));
    if (method === 'GET' && section === 'live' && rest.length === 0) return live(req, res, overview$);
    if (section === 'types') return sendJson(res, 200, await answer(typeRoute(source, method, rest, url.searchParams, req)));
    throw new HttpError(404, 'no-route', `nothing at ${path}`);
  };

  return (req, res) => {
    serve(req, res).catch((thrown: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      sendError(res, asHttpError(thrown));
    });
  };
}

/**
 * A request path made safe to send back in a header: one leading slash (never
 * '//', which a browser reads as another host), and every character outside
 * the unreserved set and '/' percent-encoded ('%' too, unless it starts a valid escape).
 */
function safePath(path: string): string {
  const single = `/${path.replace(/^\/+/, '')}`;
  return single.replace(/%(?![0-9A-Fa-f]{2})|[^A-Za-z0-9._~/%-]/g, (c) => encodeURIComponent(c));
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, 'bad-path', `cannot decode ${JSON.stringify(segment)}: percent-encode type names and ids (encodeURIComponent)`);
  }
}

/** Server-sent events: the overview, each time it is read, until the page goes away. */
function live(req: IncomingMessage, res: ServerResponse, overview$: Observable<Overview | { error: string }>): void {
  res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  res.write('retry: 2000\n\n');
  const subscription: Subscription = overview$.pipe(map((value) => `event: overview\ndata: ${JSON.stringify(value)}\n\n`)).subscribe((frame) => res.write(frame));
  const end = () => subscription.unsubscribe();
  req.on('close', end);
  res.on('close', end);
}
