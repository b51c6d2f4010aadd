// The iSCSI front end in the registry (target/front-end/registry.ts): RFC 7143 over plain
// TCP (docs/iscsi.md), with a portal of its own that joins TargetServer through listenWith.
// The portal is loaded when a listener needs it, so reading a config does not load it.
import type { FrontEndKind } from '../front-end/kind.js';

/** IANA's iscsi-target port (RFC 7143 §4.1). */
export const ISCSI_PORT = 3260;

export const iscsiFrontEnd: FrontEndKind<'iscsi'> = {
  name: 'iscsi',
  defaultPort: ISCSI_PORT,
  usesProvider: false,
  label: () => 'iscsi',
  listen: async (l, on) => {
    const { IscsiPortal } = await import('./portal.js');
    return on.server.listenWith((host) => IscsiPortal.listen(host, { address: l.address, port: l.port }));
  },
};
