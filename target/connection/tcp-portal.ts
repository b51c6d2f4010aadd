// A front end's TCP listener (the iSCSI portal, target/iscsi/portal.ts; the NVMe/TCP
// port, target/nvme/portal.ts): it binds, admits each accepted socket through the
// server's drain and pre-login limits (PortHost.admitConnection), hands it to the front
// end's connection, and keeps both until they close, so that stopAccepting and close
// behave the same on every TCP front end (docs/architecture.md "A front end's connection").
import { createServer, type Server, type Socket } from 'node:net';
import type { ConnectionEnvironment, ServedConnection } from './environment.js';
import type { PortHost } from '../server.js';
import type { TargetPort } from '../transport/transport.js';

/** What the portal needs of a front end's connection. */
export interface PortalConnection extends ServedConnection {
  readonly closed: Promise<void>;
  logout(kind: 'shutdown', why: string): Promise<void>;
}

export interface TcpPortalOptions<C extends PortalConnection> {
  host: PortHost;
  address: string;
  port: number;
  /** The front end's label (`rblkd ctl`, logs): the port is named `<provider>:<address>:<port>`. */
  provider: string;
  /** The listener's name in its error log line ("iSCSI portal", "NVMe/TCP listener"). */
  what: string;
  /** Why its connections are logged out at close ("portal closing"). */
  closing: string;
  /** Once bound (to `port`, the one taken), before any connection. */
  ready?: (env: ConnectionEnvironment, port: number) => void;
  /** One admitted socket's connection. */
  accept: (socket: Socket, portName: string, env: ConnectionEnvironment) => C;
  /** Run by stopAccepting, before the socket closes (e.g. leave a discovery log). */
  onStop?: () => void;
}

/** Listens on address:port (0: any free port); resolves with the server and the port it took. */
export async function bindTcp(address: string, port: number): Promise<{ server: Server; port: number }> {
  const server = createServer({ noDelay: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: address, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address();
  return { server, port: typeof bound === 'object' && bound !== null ? bound.port : port };
}

export class TcpPortal<C extends PortalConnection> implements TargetPort {
  private readonly sockets = new Set<Socket>();
  private readonly connections = new Set<C>();
  private accepting = true;
  private closedServer: Promise<void> = Promise.resolve();

  private constructor(
    private readonly server: Server,
    readonly provider: string,
    readonly address: string,
    readonly port: number,
    private readonly onStop: () => void,
    private readonly closing: string,
  ) {}

  static async listen<C extends PortalConnection>(o: TcpPortalOptions<C>): Promise<TcpPortal<C>> {
    const { server, port } = await bindTcp(o.address, o.port);
    const portal = new TcpPortal<C>(server, o.provider, o.address, port, o.onStop ?? (() => undefined), o.closing);
    const portName = `${o.provider}:${o.address}:${port}`;
    const env = o.host.environment(portName);
    o.ready?.(env, port);
    server.on('error', (e) => env.log.error(`${o.what} ${portName}: ${e.message}`));
    server.on('connection', (socket) => {
      if (!portal.accepting || !o.host.admitConnection(portName, socket.remoteAddress ?? 'unknown')) {
        socket.destroy();
        return;
      }
      const c = o.accept(socket, portName, env);
      portal.sockets.add(socket);
      portal.connections.add(c);
      socket.once('close', () => portal.sockets.delete(socket));
      void c.closed.then(() => portal.connections.delete(c));
      o.host.adopt(c);
    });
    return portal;
  }

  /** Closes the listening socket; established connections stay (net.Server.close waits for them, so this does not). */
  stopAccepting(): Promise<void> {
    if (this.accepting) this.onStop();
    this.accepting = false;
    if (this.server.listening) this.closedServer = new Promise((resolve) => this.server.close(() => resolve()));
    return Promise.resolve();
  }

  /** Stops accepting, logs every connection out, and destroys what is left. */
  async close(): Promise<void> {
    await this.stopAccepting();
    await Promise.all([...this.connections].map((c) => c.logout('shutdown', this.closing)));
    for (const s of this.sockets) s.destroy();
    await this.closedServer;
  }
}
