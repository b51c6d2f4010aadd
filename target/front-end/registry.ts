// Every front end rblkd serves, registered once (docs/architecture.md "Front ends by name").
// The config schema takes its `protocol:` values from here, the loader its default ports,
// and the daemon listens through the entry a listener names. A new front end is its own
// folder and one line below.
import type { ListenerConfig } from '../../config/schema.js';
import { iscsiFrontEnd } from '../iscsi/front-end.js';
import { nvmeTcpFrontEnd } from '../nvme/front-end.js';
import { rblkFrontEnd } from '../rblk/front-end.js';
import type { FrontEndKind } from './kind.js';

/** The first is what a listener without `protocol:` speaks. */
export const FRONT_ENDS = [rblkFrontEnd, iscsiFrontEnd, nvmeTcpFrontEnd] as const;

/** A listener's `protocol:` value. */
export type FrontEndName = (typeof FRONT_ENDS)[number]['name'];

export const FRONT_END_NAMES: readonly FrontEndName[] = FRONT_ENDS.map((f) => f.name);

export const DEFAULT_FRONT_END: FrontEndName = FRONT_ENDS[0].name;

export function frontEndOf(name: FrontEndName): FrontEndKind<FrontEndName> {
  const f = FRONT_ENDS.find((k) => k.name === name);
  if (f === undefined) throw new Error(`no front end '${name}' is registered`);
  return f;
}

/** A configured listener's name before it is bound: its front end's label, address and port. */
export function listenerName(l: ListenerConfig, sep = ' '): string {
  return `${frontEndOf(l.protocol).label(l)}${sep}${l.address}:${l.port}`;
}
