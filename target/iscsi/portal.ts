// rblkd's iSCSI/TCP portal (RFC 7143 §4.1): a plain Node TCP listener whose
// connections become iSCSI sessions of the TargetServer, beside the rblk
// fabric ports, serving the same volumes, LUNs, ACLs and secrets
// (docs/iscsi.md). One portal group (tag 1) holds every portal of a server,
// so session reinstatement works across them.
import { TcpPortal } from '../connection/tcp-portal.js';
import type { PortHost } from '../server.js';
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

/** An iSCSI portal: the shared TCP portal (target/connection/tcp-portal.ts) over iSCSI connections. */
export type IscsiPortal = TcpPortal<IscsiConnection>;

export const IscsiPortal = {
  listen(host: PortHost, o: PortalOptions): Promise<IscsiPortal> {
    let registry = registries.get(host);
    if (!registry) {
      registry = new Registry();
      registries.set(host, registry);
    }
    const sessions = registry;
    return TcpPortal.listen<IscsiConnection>({
      host,
      address: o.address,
      port: o.port,
      provider: 'iscsi',
      what: 'iSCSI portal',
      closing: 'portal closing',
      accept: (socket, _portName, env) => {
        const l = env.limits;
        const memory = (l as { connectionMemory?: number }).connectionMemory;
        const offer: TargetOffer = {
          maxRecvDataSegment: Math.min(TARGET_MAX_RECV_DATA_SEGMENT, l.maxIo),
          maxBurstLength: Math.min(l.maxIo, 16777215),
          firstBurstLength: Math.min(FIRST_BURST, l.maxIo),
          maxOutstandingR2T: MAX_OUTSTANDING_R2T,
        };
        return new IscsiConnection(socket, { env, registry: sessions, offer, memoryBudget: Math.max(memory ?? 0, 4 * l.maxIo) });
      },
    });
  },
};
