// The NVMe/TCP front end in the registry (target/front-end/registry.ts): NVMe
// over TCP (NVMe TCP Transport 1.0, NVMe-oF 1.1, docs/nvme.md) with a listener
// of its own that joins TargetServer through listenWith. The listener is
// loaded when a config needs it, so reading a config does not load it.
import type { FrontEndKind } from '../front-end/kind.js';

/** IANA's nvme-tcp port (NVMe TCP Transport 1.0 §3.2: 4420 for I/O controllers, 8009 for discovery). */
export const NVME_TCP_PORT = 4420;
export const NVME_DISCOVERY_PORT = 8009;

export const nvmeTcpFrontEnd: FrontEndKind<'nvme-tcp'> = {
  name: 'nvme-tcp',
  defaultPort: NVME_TCP_PORT,
  discoveryPort: NVME_DISCOVERY_PORT,
  usesProvider: false,
  label: (l) => (l.discovery === true ? 'nvme-tcp-discovery' : 'nvme-tcp'),
  listen: async (l, on) => {
    const { NvmeTcpPortal } = await import('./portal.js');
    return on.server.listenWith((host) => NvmeTcpPortal.listen(host, { address: l.address, port: l.port, discoveryOnly: l.discovery === true }));
  },
};
