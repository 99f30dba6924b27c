import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { InvalidOptionError } from '../index';
import { HttpError } from './http-io';

/** Who may use the dashboard: a shared token, or a user name and password (HTTP basic auth). */
export type DashboardAuth = { readonly token: string } | { readonly basic: { readonly username: string; readonly password: string } };

/** The header every action must carry: a page on another site cannot send it without a CORS preflight, which is never granted. */
export const ACTION_HEADER = 'x-delayed-events-action';
/** Holds the token once a browser opened the dashboard with `?token=`. */
export const TOKEN_COOKIE = 'delayed_events_token';

function sameSecret(given: string, expected: string): boolean {
  // Hashing first makes the comparison constant-time whatever the lengths.
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** A cookie's value; undefined when absent or malformed (a bad percent-encoding is no credential). */
function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/** Host names every dashboard without auth answers to: the loopback ones. */
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** The host name of a Host header, without its port, lower-cased; IPv6 keeps its brackets. */
export function hostName(host: string): string {
  const lower = host.trim().toLowerCase();
  if (lower.startsWith('[')) {
    const close = lower.indexOf(']');
    return close < 0 ? lower : lower.slice(0, close + 1);
  }
  const colon = lower.lastIndexOf(':');
  return colon < 0 ? lower : lower.slice(0, colon);
}

/**
 * Refuses a request whose Host the dashboard does not answer to. A page on
 * another site can make a browser send requests to a loopback port through a
 * name it controls (DNS rebinding): its Host then names that site. Without
 * auth only loopback names (and `allowedHosts`) are served; with auth, every
 * name unless `allowedHosts` is given. An absolute-form request line must name
 * the same host as its Host header.
 */
export function checkHost(req: IncomingMessage, allowedHosts: ReadonlySet<string> | undefined, authenticated: boolean): void {
  const host = req.headers.host;
  if (typeof host !== 'string' || host === '') throw new HttpError(400, 'host', 'a request needs a Host header');
  const url = req.url ?? '/';
  if (!url.startsWith('/')) {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      throw new HttpError(400, 'bad-path', 'the request target is not a path');
    }
    if (target.host.toLowerCase() !== host.toLowerCase()) throw new HttpError(400, 'host', 'the request line names another host than the Host header');
  }
  const name = hostName(host);
  if (allowedHosts) {
    if (allowedHosts.has(name) || (!authenticated && LOOPBACK_HOSTS.has(name))) return;
  } else if (authenticated || LOOPBACK_HOSTS.has(name) || name.endsWith('.localhost')) {
    return;
  }
  throw new HttpError(403, 'host', `this dashboard does not answer to the host ${JSON.stringify(name)}; without auth it answers to loopback names only (add it to allowedHosts, or --allow-host)`);
}

export function checkAllowedHosts(hosts: unknown): ReadonlySet<string> | undefined {
  if (hosts === undefined) return undefined;
  if (!Array.isArray(hosts) || hosts.some((h) => typeof h !== 'string' || h === '' || /[\s/]/.test(h) || /^[^:[\]]+:\d+$/.test(h) || /^\[.*\]:\d+$/.test(h))) {
    throw new InvalidOptionError('allowedHosts', 'must be an array of host names (without port), such as ["ops.example.com"]');
  }
  return new Set(hosts.map((h: string) => hostName(h.includes(':') && !h.startsWith('[') ? `[${h}]` : h)));
}

/** Throws 401 unless the request carries the credentials `auth` asks for; `queryToken` is a `?token=` of the page request. */
export function checkCredentials(req: IncomingMessage, auth: DashboardAuth | undefined, queryToken: string | undefined): void {
  if (!auth) return;
  const header = req.headers.authorization ?? '';
  if ('token' in auth) {
    const given = header.startsWith('Bearer ') ? header.slice(7) : (queryToken ?? cookie(req, TOKEN_COOKIE));
    if (given !== undefined && sameSecret(given, auth.token)) return;
    throw new HttpError(401, 'unauthorized', 'send the dashboard token: open the page with ?token=<token> once, or send Authorization: Bearer <token>');
  }
  if (header.startsWith('Basic ')) {
    const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon >= 0 && sameSecret(decoded.slice(0, colon), auth.basic.username) && sameSecret(decoded.slice(colon + 1), auth.basic.password)) return;
  }
  throw new HttpError(401, 'unauthorized', 'sign in with the dashboard user name and password', { 'www-authenticate': 'Basic realm="delayed-events", charset="UTF-8"' });
}

/**
 * Actions change what is stored, so a page on another site must not be able
 * to trigger one through the user's browser (which would send the cookie or
 * the basic-auth credentials along): each must be a same-origin POST with a
 * JSON body and the action header.
 */
export function checkAction(req: IncomingMessage): void {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') throw new HttpError(403, 'cross-site', `actions are refused from another site (Sec-Fetch-Site: ${String(site)})`);
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== 'null') {
    let host: string | undefined;
    try {
      host = new URL(origin).host;
    } catch {
      host = undefined;
    }
    if (host !== req.headers.host) throw new HttpError(403, 'cross-site', `actions are refused from another origin (${origin})`);
  } else if (origin === 'null') {
    throw new HttpError(403, 'cross-site', 'actions are refused from an opaque origin');
  }
  if (req.headers[ACTION_HEADER] !== '1') throw new HttpError(403, 'missing-action-header', `actions must send the header ${ACTION_HEADER}: 1`);
  // Exactly JSON: a type with other parameters is no JSON body a form or a beacon could not also send.
  const type = (req.headers['content-type'] ?? '').replace(/\s+/g, '').toLowerCase();
  if (type !== 'application/json' && type !== 'application/json;charset=utf-8') throw new HttpError(415, 'json-only', 'actions take a JSON body (Content-Type: application/json)');
}

export function checkAuthOption(auth: unknown): DashboardAuth | undefined {
  if (auth === undefined) return undefined;
  const invalid = () => new InvalidOptionError('auth', 'must be { token: string } (at least 16 characters) or { basic: { username, password } } (non-empty strings)');
  if (auth === null || typeof auth !== 'object') throw invalid();
  // One of the two, with nothing else: a misspelt key must not pass unnoticed, nor a token beside basic credentials.
  const keys = Object.keys(auth);
  if (keys.length !== 1 || (keys[0] !== 'token' && keys[0] !== 'basic')) throw invalid();
  const basicKeys = 'basic' in auth && auth.basic !== null && typeof auth.basic === 'object' ? Object.keys(auth.basic) : [];
  if (basicKeys.some((k) => k !== 'username' && k !== 'password')) throw invalid();
  if ('token' in auth) {
    const token = (auth as { token: unknown }).token;
    if (typeof token !== 'string' || token.length < 16) throw invalid();
    return { token };
  }
  if ('basic' in auth) {
    const basic = (auth as { basic: unknown }).basic as { username?: unknown; password?: unknown } | null;
    if (!basic || typeof basic.username !== 'string' || typeof basic.password !== 'string' || basic.username === '' || basic.password === '' || basic.username.includes(':')) throw invalid();
    return { basic: { username: basic.username, password: basic.password } };
  }
  throw invalid();
}
