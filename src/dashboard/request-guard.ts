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

function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

/** Throws 401 unless the request carries the credentials `auth` asks for; `queryToken` is a `?token=` the caller read. */
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
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
  if (type !== 'application/json') throw new HttpError(415, 'json-only', 'actions take a JSON body (Content-Type: application/json)');
}

export function checkAuthOption(auth: unknown): DashboardAuth | undefined {
  if (auth === undefined) return undefined;
  const invalid = () => new InvalidOptionError('auth', 'must be { token: string } (at least 16 characters) or { basic: { username, password } } (non-empty strings)');
  if (auth === null || typeof auth !== 'object') throw invalid();
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
