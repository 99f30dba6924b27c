import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Certificate files for a TLS-only server (`tls-auth-clients no`: clients need no certificate). */
export interface TlsFiles {
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
}

/** A private redis-server on a free loopback port, for tests, benchmarks and the demo. */
export class RedisServer {
  private process: ChildProcess | undefined;

  private constructor(
    readonly port: number,
    private readonly args: readonly string[],
    private readonly dir: string,
    private readonly tls: TlsFiles | undefined,
  ) {}

  /** With `tls`, the port speaks TLS only. */
  static async start(args: readonly string[] = [], tls?: TlsFiles): Promise<RedisServer> {
    let lastError: unknown;
    for (let tries = 0; tries < 5; tries++) {
      const server = new RedisServer(await freePort(), args, mkdtempSync(join(tmpdir(), 'rde-redis-')), tls);
      try {
        await server.launch();
        return server;
      } catch (error) {
        lastError = error;
        server.cleanUp();
      }
    }
    throw lastError;
  }

  get url(): string {
    return this.tls ? `rediss://localhost:${this.port}` : `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.process?.pid;
  }

  /** Stops the server by PID and waits for it to exit. */
  async stop(): Promise<void> {
    await this.halt('SIGTERM');
    this.cleanUp();
  }

  /** Kills the server at once (no shutdown save), as a crash would. */
  async kill(): Promise<void> {
    await this.halt('SIGKILL');
  }

  /** Starts it again on the same port after stop/kill. */
  async restart(): Promise<void> {
    await this.launch();
  }

  private launch(): Promise<void> {
    const listen = this.tls
      ? ['--port', '0', '--tls-port', String(this.port), '--tls-cert-file', this.tls.cert, '--tls-key-file', this.tls.key, '--tls-ca-cert-file', this.tls.ca, '--tls-auth-clients', 'no']
      : ['--port', String(this.port)];
    const child = spawn('redis-server', [...listen, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, ...this.args], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.process = child;
    stopOnExit.add(child);
    return new Promise<void>((resolve, reject) => {
      let output = '';
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) {
          child.stdout?.off('data', onData);
          child.stdout?.resume();
          resolve();
        }
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.once('exit', (code) => reject(new Error(`redis-server on port ${this.port} exited with ${code}: ${output.slice(-500)}`)));
      child.once('error', reject);
    });
  }

  private halt(signal: NodeJS.Signals): Promise<void> {
    const child = this.process;
    this.process = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    stopOnExit.delete(child);
    return new Promise((resolve) => {
      child.once('exit', () => resolve());
      process.kill(child.pid!, signal);
    });
  }

  private cleanUp(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

// A test run that dies must not leave servers behind.
const stopOnExit = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of stopOnExit) child.kill('SIGKILL');
});

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
