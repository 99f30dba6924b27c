import { Cluster, Command, Redis } from 'ioredis';
import type { RedisClient } from './lua-scripts';

/** One argument as Redis reads it: a RESP bulk string. */
export function bulkString(text: string): string {
  return '$' + Buffer.byteLength(text) + '\r\n' + text + '\r\n';
}

/**
 * An EVALSHA whose text was written by the caller. ioredis's own evalsha()
 * copies its arguments with Array.prototype.flat and encodes each of them on
 * every call, ~2-3 µs for the dozen arguments of an enqueue; an enqueue's keys
 * and fixed arguments are the same call after call, so their text is written
 * once per queue, and only the events' arguments on each call. `args` stay
 * what they are for ioredis (a cluster finds the slot from them, an error names them).
 */
class PrewrittenEvalsha extends Command {
  constructor(
    args: string[],
    private readonly written: string,
    errorStack: Error | undefined,
  ) {
    // No arguments for ioredis to copy: they are set below, already strings.
    super('evalsha', [], { replyEncoding: 'utf8', errorStack });
    this.args = args;
  }

  override toWritable(): string {
    return this.written;
  }
}

/**
 * Whether `client` can be sent a prewritten EVALSHA with the same effect as
 * client.evalsha(): a client of this copy of ioredis (a client of another
 * copy takes only its own Command class), without a keyPrefix or
 * auto-pipelining, which evalsha() applies and sendCommand() does not.
 */
export function takesPrewritten(client: RedisClient): boolean {
  const options = client.options as { keyPrefix?: unknown; enableAutoPipelining?: unknown };
  return (client instanceof Redis || client instanceof Cluster) && !options.keyPrefix && !options.enableAutoPipelining;
}

/**
 * EVALSHA of `args` (the sha, the number of keys, then keys and arguments, all
 * strings), whose text from the sha on is `written`: bulkString() of each.
 */
export function sendPrewritten(client: RedisClient, args: string[], written: string): Promise<unknown> {
  const errorStack = client.options.showFriendlyErrorStack ? new Error() : undefined;
  const command = new PrewrittenEvalsha(args, '*' + (args.length + 1) + '\r\n$7\r\nevalsha\r\n' + written, errorStack);
  // What evalsha() returns: its promise, or, when ioredis traces commands, the traced one.
  return client.sendCommand(command) as Promise<unknown>;
}
