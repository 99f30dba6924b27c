/**
 * The Python producer's enqueue rate (clients/python, Debian's python3-redis),
 * one at a time and with enqueue_many, beside redis-py's bare EVALSHA of the
 * same script (arguments built beforehand): what the producer adds to the
 * floor of the client library. One private redis-server; median of 3 rounds.
 *
 *   npm run bench:python      (writes benchmarks/PYTHON-RESULTS.md)
 */
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { RedisServer } from '../test/support/redis-server';

const ROUNDS = 3;
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const rounds: Array<Record<string, number>> = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const out = execFileSync(PYTHON, [join(__dirname, 'python', 'enqueue_rate.py')], { env: { ...process.env, REDIS_URL: server.url }, encoding: 'utf8' });
      rounds.push(JSON.parse(out.trim().split('\n').pop()!) as Record<string, number>);
    }
  } finally {
    await server.stop();
  }
  const redisPy = execFileSync(PYTHON, ['-c', 'import redis, sys; print(redis.__version__, sys.version.split()[0])'], { encoding: 'utf8' }).trim().split(' ');
  const names = Object.keys(rounds[0]!);
  const lines = [
    '# The Python producer: enqueue rate',
    '',
    `Measured by \`npm run bench:python\` on ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Python ${redisPy[1]}, redis-py ${redisPy[0]}, one private redis-server on loopback; 5,000 events per way, median of ${ROUNDS} rounds (the rounds in brackets). Events per second.`,
    '',
    '| way | events/s |',
    '|---|---|',
    ...names.map((name) => `| ${name} | ${Math.round(median(rounds.map((r) => r[name]!))).toLocaleString('en-US')} (${rounds.map((r) => Math.round(r[name]!).toLocaleString('en-US')).join(', ')}) |`),
    '',
    'One at a time, each call waits for its reply: the round trip is the floor, and the producer adds its checks and encoding (the payload walked once, the extras, the key names) to it. `enqueue_many` sends one script call per queue with up to 250 events: beside pipelined bare calls of one event each it pays one round trip for the batch.',
    '',
  ];
  writeFileSync(join(__dirname, 'PYTHON-RESULTS.md'), lines.join('\n'));
  process.stdout.write(lines.join('\n'));
}

void main();
