import { DEFAULT_RATE_LIMITED_MS, MAX_RATE_LIMITED_MS, classifyRedisError } from '../core/errors';

/** A handler asking for a hold out of range is said once per type and group a minute. */
const HOLD_REFUSED_EVERY_MS = 60_000;
import { METRIC, type Notice } from './metrics';

/**
 * What the service logs to: pino's shape (`logger.warn({ type, id }, 'message')`),
 * which pino, bunyan and many others have. `debug` and `info` may be missing.
 */
export interface Logger {
  debug?(fields: object, message: string): void;
  info?(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** What the service logs by default (no `logger` option): warnings and recoveries, on the console, one line each. */
export const consoleLogger: Logger = {
  info: (fields, message) => console.info(line(message, fields)),
  warn: (fields, message) => console.warn(line(message, fields)),
  error: (fields, message) => console.error(line(message, fields)),
};

function line(message: string, fields: object): string {
  let json = '';
  try {
    json = JSON.stringify(fields);
  } catch {
    json = '{}';
  }
  return `reactive-delayed-events: ${message} ${json}`;
}

export interface LastError {
  readonly message: string;
  /** ms since the epoch */
  readonly at: number;
}

export interface ServiceLogSettings {
  /** Where to log; false: nowhere (what happened is still kept for health()). */
  readonly logger: Logger | false;
  /** Include event payloads in dead-letter records. */
  readonly logPayloads: boolean;
  readonly prefix: string;
  /** Asks Redis whether it answers (a PING); resolves when it did. */
  readonly ping: () => Promise<unknown>;
}

/** How often Redis is asked during an outage whether it is back. */
const PROBE_EVERY_MS = 1_000;
/** An outage is over once Redis answers and no call failed for this long. */
const QUIET_MS = 1_000;
/** Watchdog and wake-listener resets: at most one record per type (or listener) this often. */
const RESET_EVERY_MS = 60_000;
/** Dead letters: this many records per type per window, then one line saying how many more there were. */
const DEAD_LETTERS_PER_WINDOW = 5;
const DEAD_LETTER_WINDOW_MS = 60_000;

/**
 * The service's log, written from the same places metrics are counted (Notice):
 * rate-limited so that an outage is one warning per loop, not one per retry,
 * and one record when Redis answers again. It also keeps what health() reports:
 * whether an outage is under way and the last error.
 */
export class ServiceLog {
  private readonly logger: Logger | undefined;
  /** The outage under way: when it started, the loops already warned about, failed calls. */
  private outage: { readonly since: number; readonly warned: Set<string>; failures: number; lastFailure: number } | undefined;
  private probe: NodeJS.Timeout | undefined;
  private probing = false;
  private readonly lastResets = new Map<string, number>();
  private readonly deadLetterWindows = new Map<string, { start: number; logged: number; skipped: number }>();
  private lastConnectionError: unknown;
  private closed = false;
  lastError: LastError | undefined;

  constructor(private readonly settings: ServiceLogSettings) {
    this.logger = settings.logger === false ? undefined : settings.logger;
  }

  /** Whether an outage is under way: a Redis call failed and Redis has not answered since. */
  get redisDown(): boolean {
    return this.outage !== undefined;
  }

  /** An error event of one of the service's connections (refused, reset, WRONGPASS...). */
  connectionError(error: unknown): void {
    this.lastConnectionError = error;
    this.lastError = { message: error instanceof Error ? error.message : String(error), at: Date.now() };
  }

  readonly onNotice = (notice: Notice): void => {
    if (this.closed) return;
    if (notice.kind === 'dead-letter') return this.deadLetter(notice);
    if (notice.kind === 'hold-refused') return this.holdRefused(notice);
    switch (notice.name) {
      case METRIC.redisErrors:
        return this.failed(notice.tags.loop ?? '', notice.tags.type ?? '', notice.value);
      case METRIC.redisCallTimeouts:
        return this.failed('call-timeout', '', notice.value, notice.tags.connection);
      case METRIC.watchdogResets:
        return this.reset(`reader:${notice.tags.type}`, { type: notice.tags.type }, 'a blocking read hung past readerBlockMs + watchdogGraceMs; its connection was replaced');
      case METRIC.wakeListenerResets:
        return this.reset('wake-listener', {}, 'the wake-up subscriber stopped answering PING; its connection was replaced');
      case METRIC.callsAbandoned:
        return this.write(
          'warn',
          { prefix: this.settings.prefix, type: notice.tags.type, group: notice.tags.group, reason: notice.tags.reason, calls: notice.value },
          notice.tags.reason === 'shutdown'
            ? 'close() stopped waiting for running calls: their signals were aborted and their events come back, attempts unspent, once their leases lapse'
            : 'running calls lost their leases (renewals failed or came too late, or their events were cancelled or replaced): their signals were aborted, and their events may run elsewhere',
        );
      case METRIC.claimsReleased:
        return this.write('debug', { type: notice.tags.type, group: notice.tags.group, events: notice.value }, 'events of a claim whose reply was lost were given back');
      default:
        return undefined;
    }
  };

  private readonly degradedSaid = new Set<string>();

  /** A feature that works less well than it should (no wake-ups: polling): one record per feature. */
  degraded(feature: string, message: string): void {
    if (this.closed || this.degradedSaid.has(feature)) return;
    this.degradedSaid.add(feature);
    this.write('warn', { prefix: this.settings.prefix, feature }, message);
  }

  /** The ACL user may not run a command the service needs: one record per distinct refusal. */
  refused(error: Error): void {
    if (this.closed) return;
    this.lastError = { message: error.message, at: Date.now() };
    this.write('warn', { prefix: this.settings.prefix, reason: 'permission', error: error.message }, 'Redis refuses a command the service needs (ACL); what needs it waits until it is granted');
  }

  /**
   * Redis lost what this instance had registered (groups, schedules) and it
   * registers them again: one record per time it happens.
   */
  registrationsLost(fields: Record<string, unknown>): void {
    if (this.closed) return;
    this.write(
      'warn',
      { prefix: this.settings.prefix, ...fields },
      'Redis lost what this instance had registered (it restarted without persistence, was flushed, or failed over to an empty replica); registering it again. Events stored before are gone with it',
    );
  }

  /** A type obliterated by hand was started again by a handler elsewhere: this instance registers its groups again. */
  startedAgain(fields: Record<string, unknown>): void {
    if (this.closed) return;
    this.write('info', { prefix: this.settings.prefix, ...fields }, 'the type was obliterated and a handler started it again; this instance registers its groups on it again');
  }

  /**
   * A handler registered here changed the flow limits another instance had
   * stored for a queue: from now on every instance enforces these.
   */
  limitsChanged(fields: Record<string, unknown>): void {
    if (this.closed) return;
    this.write(
      'warn',
      { prefix: this.settings.prefix, ...fields },
      'this instance registered other flow limits (rateLimit, globalConcurrency) than another had stored; every instance now enforces the ones registered last: give every instance the same options',
    );
  }

  close(): void {
    this.closed = true;
    if (this.probe) clearInterval(this.probe);
    this.probe = undefined;
  }

  private failed(loop: string, type: string, count: number, connection?: string): void {
    const now = Date.now();
    if (!this.lastError || now - this.lastError.at > QUIET_MS) this.lastError = { message: `a Redis call of the ${loop} loop failed`, at: now };
    const outage = (this.outage ??= { since: now, warned: new Set(), failures: 0, lastFailure: now });
    outage.failures += count;
    outage.lastFailure = now;
    if (!outage.warned.has(loop)) {
      outage.warned.add(loop);
      const fields: Record<string, unknown> = { prefix: this.settings.prefix, loop };
      if (type) fields.type = type;
      if (connection) fields.connection = connection;
      const cause = this.lastConnectionError;
      if (cause !== undefined && now - (this.lastError?.at ?? 0) <= 60_000) {
        fields.reason = classifyRedisError(cause);
        fields.error = cause instanceof Error ? cause.message : String(cause);
      }
      const what = loop === 'call-timeout' ? 'a Redis call outlived commandTimeoutMs' : loop === 'connection' ? 'a Redis connection failed' : `Redis calls of the ${loop} loop fail`;
      this.write('warn', fields, `${what}; the service retries with backoff until Redis answers (one warning per loop and outage)`);
    }
    this.startProbing();
  }

  /** While an outage is under way, asks Redis every second; once it answers and calls stopped failing, says so once. */
  private startProbing(): void {
    if (this.probe || this.closed) return;
    this.probe = setInterval(() => {
      if (this.probing || !this.outage) return;
      this.probing = true;
      let answered = false;
      const timeout = setTimeout(() => (this.probing = false), PROBE_EVERY_MS * 2);
      timeout.unref();
      this.settings
        .ping()
        .then(
          () => (answered = true),
          () => undefined,
        )
        .finally(() => {
          clearTimeout(timeout);
          this.probing = false;
          const outage = this.outage;
          if (!answered || !outage || this.closed || Date.now() - outage.lastFailure < QUIET_MS) return;
          this.outage = undefined;
          this.lastConnectionError = undefined;
          if (this.probe) clearInterval(this.probe);
          this.probe = undefined;
          this.write('info', { prefix: this.settings.prefix, downMs: Date.now() - outage.since, failedCalls: outage.failures }, 'Redis answers again; the service carries on');
        });
    }, PROBE_EVERY_MS);
    this.probe.unref();
  }

  private reset(key: string, fields: Record<string, unknown>, message: string): void {
    const now = Date.now();
    if (now - (this.lastResets.get(key) ?? Number.NEGATIVE_INFINITY) < RESET_EVERY_MS) return;
    this.lastResets.set(key, now);
    this.write('warn', { prefix: this.settings.prefix, ...fields }, message);
  }

  /** A hold out of range: one record per type and group a minute, naming the value. */
  private holdRefused(notice: Extract<Notice, { kind: 'hold-refused' }>): void {
    const key = `hold|${notice.type}|${notice.group}`;
    const now = Date.now();
    if (now - (this.lastResets.get(key) ?? Number.NEGATIVE_INFINITY) < HOLD_REFUSED_EVERY_MS) return;
    this.lastResets.set(key, now);
    this.write(
      'warn',
      { prefix: this.settings.prefix, type: notice.type, group: notice.group, asked: notice.asked, heldForMs: DEFAULT_RATE_LIMITED_MS },
      `a handler asked to hold the queue for ${notice.asked} ms, which is no number of ms from 1 to ${MAX_RATE_LIMITED_MS}; it was held for ${DEFAULT_RATE_LIMITED_MS} ms`,
    );
  }

  private deadLetter(notice: Extract<Notice, { kind: 'dead-letter' }>): void {
    const now = Date.now();
    const key = `${notice.type}|${notice.group}`;
    let window = this.deadLetterWindows.get(key);
    if (!window || now - window.start >= DEAD_LETTER_WINDOW_MS) {
      if (window && window.skipped > 0) {
        this.write('warn', { prefix: this.settings.prefix, type: notice.type, group: notice.group, notLogged: window.skipped }, 'more events were dead-lettered than were logged');
      }
      window = { start: now, logged: 0, skipped: 0 };
      this.deadLetterWindows.set(key, window);
    }
    if (window.logged >= DEAD_LETTERS_PER_WINDOW) {
      window.skipped++;
      return;
    }
    window.logged++;
    const fields: Record<string, unknown> = {
      prefix: this.settings.prefix,
      type: notice.type,
      id: notice.id,
      group: notice.group,
      attempt: notice.attempt,
      reason: notice.reason,
      error: notice.error,
    };
    if (this.settings.logPayloads && notice.payload !== undefined) fields.payload = notice.payload;
    this.write('warn', fields, notice.reason === 'decode' ? 'a stored event could not be decoded; it was dead-lettered' : 'an event was dead-lettered');
  }

  /** Never throws: a broken logger must not break the loop that logs. */
  private write(level: 'debug' | 'info' | 'warn', fields: object, message: string): void {
    const logger = this.logger;
    if (!logger) return;
    try {
      const method = logger[level] ?? (level === 'info' ? logger.warn : undefined);
      method?.call(logger, fields, message);
    } catch {
      // Nothing to do: the log is best effort.
    }
  }
}
