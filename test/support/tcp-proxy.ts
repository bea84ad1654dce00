import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a server, so a test can cut every connection through it at once with a
 * reset (the client sees ECONNRESET), as a dying API server or a broken network does.
 */
export class TcpProxy {
  private readonly sockets = new Set<Socket>();
  private server: Server | undefined;
  port = 0;
  cuts = 0;

  constructor(
    readonly host: string,
    private readonly target: { host: string; port: number },
  ) {}

  async listen(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = connect(this.target.port, this.target.host);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => this.server?.listen(0, this.host, resolve));
    const address = this.server.address();
    this.port = typeof address === 'object' && address !== null ? address.port : 0;
  }

  /** Resets every open connection; returns how many there were. */
  cut(): number {
    const open = [...this.sockets];
    for (const socket of open) socket.resetAndDestroy();
    this.cuts++;
    return open.length;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => {
      if (this.server) this.server.close(() => {
        resolve();
      });
      else resolve();
    });
  }
}
