// What a front end brings to the daemon and the config (docs/architecture.md "Front ends
// by name"): the name a listener's `protocol:` selects, its default port, whether it runs
// over a libfabric provider, what its listeners are called, and how one listens. The daemon,
// the config, reload plans and error messages ask the registry (registry.ts); none of them
// names a protocol.
import type { ListenerConfig } from '../../config/schema.js';
import type { TargetServer } from '../server.js';
import type { TargetPort, TargetTransport } from '../transport/transport.js';

/** What listen() gets from the daemon. */
export interface FrontEndListen {
  readonly server: TargetServer;
  /** The libfabric transport, for a front end that uses a provider. */
  readonly transport: TargetTransport;
}

export interface FrontEndKind<Name extends string = string> {
  /** The config's `protocol:` value. */
  readonly name: Name;
  /** A listener's port when the config names none. */
  readonly defaultPort: number;
  /**
   * A front end with a discovery service of its own (NVMe-oF's discovery controller) takes
   * `discovery: true` on a listener that serves only that, on this port when none is named.
   */
  readonly discoveryPort?: number;
  /**
   * Whether its listeners run over a libfabric provider (`provider:`); otherwise the
   * front end brings its own transport (plain TCP) and the config refuses `provider:`.
   */
  readonly usesProvider: boolean;
  /** A listener's name in logs, `rblkd ctl`, reload results and errors, before it is bound: `tcp`, `iscsi`. */
  label(l: ListenerConfig): string;
  /** Binds one listener; its connections join `server`. */
  listen(l: ListenerConfig, on: FrontEndListen): Promise<TargetPort>;
}
