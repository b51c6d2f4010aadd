// The rblk front end in the registry (target/front-end/registry.ts): capsules over a
// libfabric provider, served by TargetServer.listen and RblkConnection.
import { RBLK_PORT } from '../../protocol/wire/constants.js';
import type { FrontEndKind } from '../front-end/kind.js';

export const rblkFrontEnd: FrontEndKind<'rblk'> = {
  name: 'rblk',
  defaultPort: RBLK_PORT,
  usesProvider: true,
  label: (l) => l.provider,
  listen: (l, on) => on.server.listen({ transport: on.transport, provider: l.provider, address: l.address, port: l.port }),
};
