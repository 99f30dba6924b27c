import { InvalidOptionError } from '../core/errors';
import { EventCodec } from '../core/event-codec';
import { LuaScripts } from '../redis/lua-scripts';
import type { RedisClient } from '../redis/redis-client';
import { RedisConnections } from '../redis/redis-connections';
import { RedisLayout } from '../redis/redis-layout';
import { INSPECTOR_OPTION_KEYS, type InspectorOptions } from './inspection-types';
import { checkOptionKeys } from '../core/option-keys';
import { Inspector } from './inspector';
import { DEFAULT_IDEMPOTENCY_WINDOW_MS, DEFAULT_PREFIX, MAX_IDEMPOTENCY_WINDOW_MS, checkRedisOption, integer, positive } from './service-options';

/**
 * An Inspector for the events stored under `prefix`, for tools and operators:
 * it needs none of the application's event classes (types are named by their
 * string) and runs no handler. close() releases the connection it opened.
 */
export function createInspector(options: InspectorOptions): Inspector {
  if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', 'expected an object with at least { redis }');
  checkOptionKeys(options, INSPECTOR_OPTION_KEYS, 'createInspector');
  checkRedisOption(options.redis);
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const commandTimeoutMs = positive('commandTimeoutMs', options.commandTimeoutMs, 10_000);
  const layout = new RedisLayout(prefix);
  const connections = new RedisConnections(options.redis as string | RedisClient, () => undefined);
  // cancel() marks the id for this long, as the services do: a late re-send of its enqueue does not bring it back.
  const idempotencyWindowMs = integer('idempotencyWindowMs', options.idempotencyWindowMs, DEFAULT_IDEMPOTENCY_WINDOW_MS, 0, MAX_IDEMPOTENCY_WINDOW_MS);
  const scripts = new LuaScripts(connections.command, layout.wakeChannel, { ms: commandTimeoutMs, onStuck: () => connections.resetCommandConnection() }, idempotencyWindowMs);
  return new Inspector({ client: connections.command, layout, scripts, codec: new EventCodec(Number.MAX_SAFE_INTEGER), connections });
}
