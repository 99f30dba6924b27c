import type { IncomingMessage, ServerResponse } from 'node:http';

/** An answer other than 200, with what to fix: sent as `{ error: { code, message } }`. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }
}

/** Largest request body the dashboard reads: ids of a page of dead letters fit many times over. */
const MAX_BODY_BYTES = 256 * 1024;

/**
 * Nothing the dashboard serves may be framed, sniffed or leak its URL, and the
 * page runs only its own script: a payload that smuggled markup into the page
 * could not run it.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function sendError(res: ServerResponse, error: HttpError): void {
  sendJson(res, error.status, { error: { code: error.code, message: error.message } }, error.headers);
}

/**
 * The request's JSON body: an object, or `{}` when there is none. Where the
 * host framework's body parser read the stream already (Express's json(),
 * NestJS, Fastify), it takes what the parser left in `req.body`.
 */
export async function readJsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const already = (req as IncomingMessage & { body?: unknown }).body;
  if (already !== undefined && already !== null && typeof already === 'object' && !Buffer.isBuffer(already)) {
    if (Array.isArray(already)) throw new HttpError(400, 'bad-json', 'the request body must be a JSON object');
    return already as Record<string, unknown>;
  }
  if (req.readableEnded) return {};
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, 'body-too-large', `a request body may hold at most ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new HttpError(400, 'bad-json', 'the request body is not JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new HttpError(400, 'bad-json', 'the request body must be a JSON object');
  return parsed as Record<string, unknown>;
}

/**
 * `work`, or a 503 once `ms` passed: while Redis is unreachable, ioredis holds
 * commands until it gives up reconnecting, far longer than a page should wait.
 * An action that times out may still take effect: the message says so.
 */
export function within<T>(ms: number, work: Promise<T>, acting: boolean): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const detail = acting ? '; the action may still take effect once Redis answers, check before trying again' : '';
      reject(new HttpError(503, 'redis-unavailable', `Redis did not answer within ${ms} ms${detail}`));
    }, ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
