// What every NVMe/TCP listener of one TargetServer shares (docs/nvme.md
// "Controllers"): the subsystem NQN, the controllers of the dynamic
// controller model (NVMe-oF 1.1 §3.3 Connect, CNTLID FFFFh) and the listeners
// the discovery log lists (NVMe-oF 1.1 §5.4). Keyed by the server's SCSI
// target object, which every environment of one server shares.
import type { ConnectionEnvironment } from '../connection/environment.js';
import type { Controller } from './controller.js';

/** A listener as the discovery log lists it. */
export interface Listener {
  readonly address: string;
  readonly port: number;
  readonly portId: number;
}

/** IEEE OUI-less prefix: NQNs rblkd makes (docs/nvme.md "Configuration"). */
export const NQN_PREFIX = 'nqn.2014-08.io.rblk:';

/**
 * The subsystem NQN when the config names none: NQN_PREFIX and the target
 * name without an `iqn.` prefix, e.g. iqn.2026-11.io.rblk:disk1 →
 * nqn.2014-08.io.rblk:2026-11.io.rblk:disk1 (NQN format, Base 2.0 §4.5).
 */
export function defaultNqn(targetName: string): string {
  return NQN_PREFIX + targetName.replace(/^iqn\./, '');
}

export class Subsystem {
  readonly controllers = new Map<number, Controller>();
  readonly listeners = new Set<Listener>();
  /** GENCTR of the discovery log: bumped when the listeners change. */
  genctr = 0n;
  #next = 0;
  #portIds = 0;

  constructor(private readonly env: ConnectionEnvironment) {}

  get nqn(): string {
    return this.env.nqn ?? defaultNqn(this.env.targetName);
  }

  /**
   * A free controller ID (FFF0h-FFFFh are reserved, NVMe-oF 1.1 §3.3). Gateways
   * of one volume serve one subsystem NQN, and a host refuses two controllers
   * with the same CNTLID in one subsystem, so each gateway takes its IDs from
   * a range of its own, chosen by its ALUA target port group: group g gets
   * 256 × ((g − 1) mod 255) + 1 to + 255 (docs/nvme.md "ANA").
   */
  allocateCntlid(group = 1): number | null {
    const base = ((Math.max(1, group) - 1) % 255) * 256;
    for (let i = 0; i < 255; i++) {
      this.#next = (this.#next + 1) % 255;
      const id = base + 1 + this.#next;
      if (!this.controllers.has(id)) return id;
    }
    return null;
  }

  addListener(address: string, port: number): Listener {
    const l = { address, port, portId: ++this.#portIds };
    this.listeners.add(l);
    this.genctr++;
    return l;
  }

  removeListener(l: Listener): void {
    if (this.listeners.delete(l)) this.genctr++;
  }
}

const subsystems = new WeakMap<object, Subsystem>();

export function subsystemOf(env: ConnectionEnvironment): Subsystem {
  let s = subsystems.get(env.scsi);
  if (s === undefined) {
    s = new Subsystem(env);
    subsystems.set(env.scsi, s);
  }
  return s;
}
