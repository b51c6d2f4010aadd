// rblkd's iSCSI/TCP portal (RFC 7143 §4.1): a plain Node TCP listener whose
// connections become iSCSI sessions of the TargetServer, beside the rblk
// fabric ports, serving the same volumes, LUNs, ACLs and secrets
// (docs/iscsi.md). One portal group (tag 1) holds every portal of a server,
// so session reinstatement works across them.
import { createServer, type Server, type Socket } from 'node:net';
import type { PortHost } from '../server.js';
import type { TargetPort } from '../transport/transport.js';
import { IscsiConnection, type SessionRegistry } from './connection.js';
import type { TargetOffer } from './negotiation.js';

/** Our MaxRecvDataSegmentLength: the largest data segment a peer may send (and that we buffer at once). */
export const TARGET_MAX_RECV_DATA_SEGMENT = 262144;
const FIRST_BURST = 65536;
const MAX_OUTSTANDING_R2T = 4;

export interface PortalOptions {
  address: string;
  port: number;
}

class Registry implements SessionRegistry {
  private readonly sessions = new Map<string, IscsiConnection>();
  private tsih = 0;
  find(initiator: string, isid: string): IscsiConnection | undefined {
    return this.sessions.get(`${initiator}\0${isid}`);
  }
  add(c: IscsiConnection): void {
    this.sessions.set(`${c.initiatorName}\0${c.isid}`, c);
  }
  remove(c: IscsiConnection): void {
    const k = `${c.initiatorName}\0${c.isid}`;
    if (this.sessions.get(k) === c) this.sessions.delete(k);
  }
  nextTsih(): number {
    // RFC 7143 §11.12.6: 0 is reserved for "new session".
    this.tsih = this.tsih >= 0xffff ? 1 : this.tsih + 1;
    return this.tsih;
  }
}

const registries = new WeakMap<PortHost, Registry>();

export class IscsiPortal implements TargetPort {
  readonly provider = 'iscsi';
  private readonly connections = new Set<Socket>();
  private readonly sessions = new Set<IscsiConnection>();
  private accepting = true;

  private constructor(
    private readonly server: Server,
    readonly address: string,
    readonly port: number,
  ) {}

  static async listen(host: PortHost, o: PortalOptions): Promise<IscsiPortal> {
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
    const portal = new IscsiPortal(server, o.address, port);
    let registry = registries.get(host);
    if (!registry) {
      registry = new Registry();
      registries.set(host, registry);
    }
    const portName = `iscsi:${o.address}:${port}`;
    const env = host.environment(portName);
    server.on('error', (e) => env.log.error(`iSCSI portal ${portName}: ${e.message}`));
    server.on('connection', (socket) => {
      if (!portal.accepting || !host.admitConnection(portName, socket.remoteAddress ?? 'unknown')) {
        socket.destroy();
        return;
      }
      const l = env.limits;
      const memory = (l as { connectionMemory?: number }).connectionMemory;
      const offer: TargetOffer = {
        maxRecvDataSegment: Math.min(TARGET_MAX_RECV_DATA_SEGMENT, l.maxIo),
        maxBurstLength: Math.min(l.maxIo, 16777215),
        firstBurstLength: Math.min(FIRST_BURST, l.maxIo),
        maxOutstandingR2T: MAX_OUTSTANDING_R2T,
      };
      const c = new IscsiConnection(socket, { env, registry, offer, memoryBudget: Math.max(memory ?? 0, 4 * l.maxIo) });
      portal.connections.add(socket);
      portal.sessions.add(c);
      socket.once('close', () => portal.connections.delete(socket));
      void c.closed.then(() => portal.sessions.delete(c));
      host.adopt(c);
    });
    return portal;
  }

  /** Closes the listening socket; established connections stay (net.Server.close waits for them, so this does not). */
  stopAccepting(): Promise<void> {
    this.accepting = false;
    if (this.server.listening) this.closedServer = new Promise((resolve) => this.server.close(() => resolve()));
    return Promise.resolve();
  }

  async close(): Promise<void> {
    await this.stopAccepting();
    await Promise.all([...this.sessions].map((s) => s.logout('shutdown', 'portal closing')));
    for (const s of this.connections) s.destroy();
    await this.closedServer;
  }

  private closedServer: Promise<void> = Promise.resolve();
}
