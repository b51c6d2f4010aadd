// rblkd's NVMe/TCP listener (NVMe TCP Transport 1.0 §3.2): a plain Node TCP
// server whose connections are NVMe queues (connection.ts) joining the
// TargetServer as ServedConnections, beside the rblk and iSCSI ports, serving
// the same volumes as namespaces (docs/nvme.md). The discovery controller
// answers on the same listener (NVMe-oF 1.1 §5).
import { TcpPortal } from '../connection/tcp-portal.js';
import type { PortHost } from '../server.js';
import { NvmeTcpConnection } from './connection.js';
import { subsystemOf } from './subsystem.js';

export interface NvmePortalOptions {
  address: string;
  port: number;
  /** Only the discovery controller here (docs/nvme.md "Discovery"): not listed in the discovery log, no I/O subsystem. */
  discoveryOnly?: boolean;
}

/** An NVMe/TCP port: the shared TCP portal (target/connection/tcp-portal.ts) over NVMe queues. */
export type NvmeTcpPortal = TcpPortal<NvmeTcpConnection>;

export const NvmeTcpPortal = {
  listen(host: PortHost, o: NvmePortalOptions): Promise<NvmeTcpPortal> {
    const discoveryOnly = o.discoveryOnly === true;
    let unlist: () => void = () => undefined;
    return TcpPortal.listen<NvmeTcpConnection>({
      host,
      address: o.address,
      port: o.port,
      provider: discoveryOnly ? 'nvme-tcp-discovery' : 'nvme-tcp',
      what: 'NVMe/TCP listener',
      closing: 'listener closing',
      // A discovery-only port is where hosts ask, not where the subsystem is: the log leaves it out.
      ready: (env, port) => {
        if (discoveryOnly) return;
        const subsystem = subsystemOf(env);
        const listener = subsystem.addListener(o.address, port);
        unlist = () => subsystem.removeListener(listener);
      },
      accept: (socket, portName, env) => new NvmeTcpConnection(socket, { env, subsystem: subsystemOf(env), portName, discoveryOnly }),
      // The discovery log drops the port as it stops accepting; established queues stay.
      onStop: () => unlist(),
    });
  },
};
