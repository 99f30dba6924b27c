import { RedisConnectionError } from '../core/errors';
import type { RedisClient } from './redis-client';

/**
 * Redis runs a script's commands one by one and keeps what the first ones
 * wrote when it refuses a later one (an ACL without that command, key or
 * channel): the change would be half applied. So before a script first runs
 * on a queue, Redis is asked (redis.acl_check_cmd, Redis 7 and later) whether
 * this user may run every command the script holds, on the queue's keys and
 * the wake-up channel; a refusal fails the call with a RedisConnectionError
 * (reason 'permission') naming what to grant, and nothing runs.
 *
 * Answers are kept per script and queue, and asked again after
 * PERMISSION_RECHECK_MS, after a reconnect, and after any NOPERM: an ACL
 * narrowed while the service runs is noticed within that time or at its first
 * refusal. Redis 6.2 has no acl_check_cmd: there every check passes.
 */
export const PERMISSION_RECHECK_MS = 60_000;

const CHECK = `
if not redis.acl_check_cmd then return {} end
local refused = {}
for i = 2, #ARGV do
  local command = ARGV[i]
  local ok
  if command == 'PUBLISH' then ok = redis.acl_check_cmd(command, ARGV[1], 'x')
  elseif command == 'TIME' then ok = redis.acl_check_cmd(command)
  elseif command == 'EVALSHA' then ok = redis.acl_check_cmd(command, '0', '1', KEYS[1])
  else ok = redis.acl_check_cmd(command, KEYS[1]) end
  if not ok then refused[#refused + 1] = command end
end
return refused`;

/** Whether an error is Redis's refusal under ACL. */
export function isPermissionError(error: unknown): boolean {
  return error instanceof Error && /^NOPERM\b/.test(error.message);
}

export function permissionError(what: string, cause?: unknown): RedisConnectionError {
  return new RedisConnectionError(
    'permission',
    `the Redis user may not run ${what}${cause instanceof Error ? ` (Redis said: ${cause.message})` : ''}: grant it in the user's ACL (the README lists what the service needs; ACL LOG in redis-cli shows what was refused); nothing was stored or changed`,
    cause === undefined ? undefined : { cause },
  );
}

interface Answer {
  readonly at: number;
  /** Resolves when allowed; rejects with a RedisConnectionError('permission') otherwise. */
  readonly check: Promise<void>;
  ok: boolean;
}

/** The permission answers of one connection; see the comment at the top of this file. */
export class ScriptPermissions {
  private answers = new Map<string, Answer>();
  private prunedAt = performance.now();

  /** The refusal health() reports; one from a NOPERM reply is kept until it lapses, whatever a check says since. */
  private lastRefusal: { readonly error: RedisConnectionError; readonly at: number; readonly fromReply: boolean } | undefined;

  constructor(
    private readonly client: RedisClient,
    private readonly channel: string,
    /** Told of each new refusal (a script's check, or a NOPERM), once per distinct message. */
    private readonly onRefused: (error: RedisConnectionError) => void = () => undefined,
  ) {}

  /**
   * Each refusal told, by `what`, with when it was last seen: told again only
   * after it was not seen for PERMISSION_RECHECK_MS, however the loops' calls
   * alternate between scripts and keys meanwhile.
   */
  private told = new Map<string, number>();

  /**
   * A refusal seen: kept for health(), and told once while it keeps coming.
   * `what` names it apart from the key it met (a check: the loops ask on
   * several keys of a queue); `fromReply`: Redis refused a call (NOPERM), which
   * a later check that passes cannot undo (Redis 6.2 has no check; a check
   * may not cover what was refused).
   */
  refused(error: RedisConnectionError, what = error.message, fromReply = false): void {
    const now = performance.now();
    const seen = this.told.get(what);
    if (seen === undefined || now - seen > PERMISSION_RECHECK_MS) this.onRefused(error);
    this.told.set(what, now);
    this.lastRefusal = { error, at: now, fromReply };
  }

  /**
   * The refusal that holds now, if any: health() reports it. One not seen
   * again for PERMISSION_RECHECK_MS lapses: a script called once (a removeGroup
   * without +unlink, say) does not keep the instance unready for good, while
   * one its loops keep running into stays.
   */
  get refusal(): RedisConnectionError | undefined {
    if (this.lastRefusal && performance.now() - this.lastRefusal.at > PERMISSION_RECHECK_MS) this.lastRefusal = undefined;
    return this.lastRefusal?.error;
  }

  /**
   * Forgets the grants asked for over PERMISSION_RECHECK_MS ago (they would be
   * asked again anyway): those of queues idle since would be kept for good, a
   * few hundred bytes per handled type. Refusals stay: health() reports them.
   */
  private prune(now: number): void {
    this.prunedAt = now;
    for (const [id, answer] of this.answers) if (answer.ok && now - answer.at >= PERMISSION_RECHECK_MS) this.answers.delete(id);
  }

  /** Asks again for everything: after a reconnect or a NOPERM. */
  forget(): void {
    this.answers = new Map();
  }

  /**
   * Undefined when `commands` are known to be allowed on `key` (the usual
   * case, answered without waiting); otherwise a promise of the answer.
   */
  ensure(name: string, key: string, commands: readonly string[]): Promise<void> | undefined {
    const id = `${name}\n${key}`;
    const known = this.answers.get(id);
    const now = performance.now();
    if (now - this.prunedAt >= PERMISSION_RECHECK_MS) this.prune(now);
    if (known && now - known.at < PERMISSION_RECHECK_MS) {
      if (known.ok) return undefined;
      // A refusal said again is still the one health() reports.
      known.check.catch((error: unknown) => error instanceof RedisConnectionError && this.refused(error, error.message.split(key).join('')));
      return known.check;
    }
    const answer: Answer = { at: now, ok: false, check: this.ask(key, commands) };
    answer.check.then(
      () => {
        answer.ok = true;
        if (this.lastRefusal && !this.lastRefusal.fromReply && [...this.answers.values()].every((a) => a.ok)) this.lastRefusal = undefined;
      },
      (error: unknown) => {
        // Only a refusal is remembered; a failed check (an outage) is asked again next time.
        if (error instanceof RedisConnectionError && error.reason === 'permission') this.refused(error, error.message.split(key).join(''));
        else if (this.answers.get(id) === answer) this.answers.delete(id);
      },
    );
    this.answers.set(id, answer);
    return answer.check;
  }

  private async ask(key: string, commands: readonly string[]): Promise<void> {
    let refused: string[];
    try {
      // EVALSHA too: it runs the scripts; this check runs by EVAL, which may be allowed alone.
      refused = (await this.client.eval(CHECK, 1, key, this.channel, ...commands, 'EVALSHA')) as string[];
    } catch (error) {
      if (isPermissionError(error)) throw permissionError(`EVAL on ${key}`, error);
      throw error;
    }
    if (refused.length > 0) {
      const what = refused.map((c) => (c === 'PUBLISH' ? `PUBLISH on channel ${this.channel}` : c)).join(', ');
      throw permissionError(`${what} (on ${key})`);
    }
  }
}
