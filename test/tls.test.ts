import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayedEventService } from '../src';
import { WorkItem } from './support/events';
import { RedisServer, type TlsFiles } from './support/redis-server';
import { Worker } from './support/worker';

const openssl = (...args: string[]) => promisify(execFile)('openssl', args);

/** A throwaway CA and a server certificate for localhost and 127.0.0.1. */
async function makeCertificates(dir: string): Promise<TlsFiles> {
  const file = (name: string) => join(dir, name);
  await openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('ca.key'), '-out', file('ca.crt'), '-days', '1', '-subj', '/CN=test-ca');
  await openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('server.key'), '-out', file('server.csr'), '-subj', '/CN=localhost');
  writeFileSync(file('san.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  await openssl('x509', '-req', '-in', file('server.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-out', file('server.crt'), '-days', '1', '-extfile', file('san.cnf'));
  return { cert: file('server.crt'), key: file('server.key'), ca: file('ca.crt') };
}

describe('TLS', () => {
  let dir: string;
  let tls: TlsFiles;
  let server: RedisServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rde-tls-'));
    tls = await makeCertificates(dir);
    server = await RedisServer.start([], tls);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs over TLS when given a rediss:// URL, and the port refuses plain connections', async () => {
    const prefix = 'tls';
    // A service in its own process, given nothing but the rediss:// URL; its Node trusts our CA.
    const worker = new Worker({ REDIS_URL: server.url, PREFIX: prefix, MODE: 'stall', STALL_MS: '0', NODE_EXTRA_CA_CERTS: tls.ca });
    const producerClient = new Redis(server.url, { tls: { ca: readFileSync(tls.ca) } });
    const producer = new DelayedEventService({ redis: producerClient, prefix });
    try {
      await worker.waitForLine((l) => l.ready === true);
      await producer.enqueue(new WorkItem('over-tls', 1), 0);
      await worker.waitForLine((l) => l.finished === 'over-tls');

      const plain = new Redis(server.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      plain.on('error', () => undefined);
      await expect(plain.connect().then(() => plain.ping())).rejects.toThrow();
      plain.disconnect();
    } finally {
      await producer.close();
      producerClient.disconnect();
      await worker.kill();
    }
  });
});
