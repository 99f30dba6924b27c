import { type Server, type Socket, createServer, connect } from 'node:net';

interface Link {
  readonly client: Socket;
  readonly upstream: Socket;
  /** Every command this link has carried so far, as raw RESP text. */
  sent: string;
  blackholed: boolean;
  /** Commands still reach Redis, but its replies are dropped: Redis runs them and the client never hears. */
  repliesLost: boolean;
  /** Replies held back (holdReplies) until releaseReplies(), in order. */
  held?: Buffer[];
}

/**
 * A loopback TCP proxy in front of Redis that can black-hole chosen
 * connections: their bytes are dropped but the sockets stay open, as after a
 * network fault that leaves a half-open connection behind.
 */
export class TcpProxy {
  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly links: Set<Link>,
    private readonly log: { sent: string; silenceAfter?: string; blackholeNew?: boolean },
  ) {}

  /** From now on, Redis's replies wait here, on every open connection, until releaseReplies(): each call sent meanwhile is in flight. */
  holdReplies(): void {
    for (const link of this.links) link.held ??= [];
  }

  /** Sends the replies held back, in order, and stops holding. */
  releaseReplies(): void {
    for (const link of this.links) {
      const held = link.held ?? [];
      link.held = undefined;
      for (const chunk of held) link.client.write(chunk);
    }
  }

  /** From now on, every new connection is taken and black-holed: nothing ever answers it, as a frozen Redis would not. */
  blackholeNewConnections(): void {
    this.log.blackholeNew = true;
  }

  /** From now on, any connection that sends `command` hears nothing more from Redis: it went silent after connecting. */
  silenceConnectionsAfter(command: string): void {
    this.log.silenceAfter = command.toUpperCase();
  }

  static async start(targetPort: number): Promise<TcpProxy> {
    const links = new Set<Link>();
    const log: { sent: string; silenceAfter?: string; blackholeNew?: boolean } = { sent: '' };
    const server = createServer((client) => {
      const upstream = connect(targetPort, '127.0.0.1');
      const link: Link = { client, upstream, sent: '', blackholed: log.blackholeNew === true, repliesLost: false };
      links.add(link);
      client.on('data', (chunk) => {
        if (link.blackholed) return;
        link.sent += chunk.toString('latin1');
        log.sent += chunk.toString('latin1');
        if (log.silenceAfter && chunk.toString('latin1').toUpperCase().includes(log.silenceAfter)) link.repliesLost = true;
        upstream.write(chunk);
      });
      upstream.on('data', (chunk: Buffer) => {
        if (link.held) link.held.push(chunk);
        else if (!link.blackholed && !link.repliesLost) client.write(chunk);
      });
      const close = () => {
        links.delete(link);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', close).on('error', close);
      upstream.on('close', close).on('error', close);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (!address || typeof address !== 'object') throw new Error('proxy has no port');
    return new TcpProxy(server, address.port, links, log);
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Black-holes the open connections that have sent `command`; returns how many. */
  blackholeConnectionsThatSent(command: string): number {
    const links = this.linksThatSent(command);
    for (const link of links) link.blackholed = true;
    return links.length;
  }

  /** From now on, drops Redis's replies on the open connections that have sent `command`; returns how many. */
  loseRepliesOfConnectionsThatSent(command: string): number {
    const links = this.linksThatSent(command);
    for (const link of links) link.repliesLost = true;
    return links.length;
  }

  private linksThatSent(command: string): Link[] {
    return [...this.links].filter((link) => link.sent.toUpperCase().includes(command.toUpperCase()));
  }

  /** How often `text` (any case) was sent through the proxy, on any connection, open or closed. */
  timesSent(text: string): number {
    return this.log.sent.toUpperCase().split(text.toUpperCase()).length - 1;
  }

  /** Black-holes every open connection: bytes vanish, sockets stay open. New connections pass. */
  blackholeAll(): number {
    for (const link of this.links) link.blackholed = true;
    return this.links.size;
  }

  /** Resets every open connection, as a cut network that does report it would. */
  dropAll(): number {
    const count = this.links.size;
    for (const link of this.links) {
      link.client.destroy();
      link.upstream.destroy();
    }
    return count;
  }

  async stop(): Promise<void> {
    for (const link of this.links) {
      link.client.destroy();
      link.upstream.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
