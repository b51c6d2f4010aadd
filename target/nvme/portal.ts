// rblkd's NVMe/TCP listener (NVMe TCP Transport 1.0 §3.2): a plain Node TCP
// server whose connections are NVMe queues (connection.ts) joining the
// TargetServer as ServedConnections, beside the rblk and iSCSI ports, serving
// the same volumes as namespaces (docs/nvme.md). The discovery controller
// answers on the same listener (NVMe-oF 1.1 §5).
import { createServer, type Server, type Socket } from 'node:net';
import type { PortHost } from '../server.js';
import type { TargetPort } from '../transport/transport.js';
import { NvmeTcpConnection } from './connection.js';
import { subsystemOf } from './subsystem.js';

export interface NvmePortalOptions {
  address: string;
  port: number;
  /** Only the discovery controller here (docs/nvme.md "Discovery"): not listed in the discovery log, no I/O subsystem. */
  discoveryOnly?: boolean;
}

export class NvmeTcpPortal implements TargetPort {
  /** The listener's name in logs and `rblkd ctl` (the front end's label). */
  readonly provider: 'nvme-tcp' | 'nvme-tcp-discovery';
  private readonly sockets = new Set<Socket>();
  private readonly queues = new Set<NvmeTcpConnection>();
  private accepting = true;
  private closedServer: Promise<void> = Promise.resolve();
  private unlist: () => void = () => undefined;

  private constructor(
    private readonly server: Server,
    readonly address: string,
    readonly port: number,
    discoveryOnly: boolean,
  ) {
    this.provider = discoveryOnly ? 'nvme-tcp-discovery' : 'nvme-tcp';
  }

  static async listen(host: PortHost, o: NvmePortalOptions): Promise<NvmeTcpPortal> {
    const server = createServer({ noDelay: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: o.address, port: o.port }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const bound = server.address();
    const port = typeof bound === 'object' && bound !== null ? bound.port : o.port;
    const portal = new NvmeTcpPortal(server, o.address, port, o.discoveryOnly === true);
    const portName = `${portal.provider}:${o.address}:${port}`;
    const env = host.environment(portName);
    const subsystem = subsystemOf(env);
    // A discovery-only port is where hosts ask, not where the subsystem is: the log leaves it out.
    if (o.discoveryOnly !== true) {
      const listener = subsystem.addListener(o.address, port);
      portal.unlist = () => subsystem.removeListener(listener);
    }
    server.on('error', (e) => env.log.error(`NVMe/TCP listener ${portName}: ${e.message}`));
    server.on('connection', (socket) => {
      if (!portal.accepting || !host.admitConnection(portName, socket.remoteAddress ?? 'unknown')) {
        socket.destroy();
        return;
      }
      const c = new NvmeTcpConnection(socket, { env, subsystem, portName, discoveryOnly: o.discoveryOnly === true });
      portal.sockets.add(socket);
      portal.queues.add(c);
      socket.once('close', () => portal.sockets.delete(socket));
      void c.closed.then(() => portal.queues.delete(c));
      host.adopt(c);
    });
    return portal;
  }

  /** Closes the listening socket and leaves the discovery log; established queues stay. */
  stopAccepting(): Promise<void> {
    this.accepting = false;
    this.unlist();
    if (this.server.listening) this.closedServer = new Promise((resolve) => this.server.close(() => resolve()));
    return Promise.resolve();
  }

  async close(): Promise<void> {
    await this.stopAccepting();
    await Promise.all([...this.queues].map((q) => q.logout('shutdown', 'listener closing')));
    for (const s of this.sockets) s.destroy();
    await this.closedServer;
  }
}
