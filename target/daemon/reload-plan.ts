// What a reload changes (docs/operations.md "Reloading"), worked out before
// anything is touched, so that a reload is applied whole or not at all.
// Volumes are matched by name. A served volume may gain a new ACL, new QoS
// limits or a larger size; anything else about it (backing path, block size, LUN, identity,
// read-only, O_DIRECT, thin provisioning, an rbd volume's fast_path) is fixed while initiators may have
// it open, and changing it refuses the reload.
import { formatSize } from '../../config/size.js';
import type { Config, ListenerConfig, VolumeConfig } from '../../config/schema.js';
import { kindOf } from '../backend/registry.js';
import { listenerName } from '../front-end/registry.js';

export interface KeptVolume {
  from: VolumeConfig;
  to: VolumeConfig;
}

export interface ReloadPlan {
  added: VolumeConfig[];
  removed: VolumeConfig[];
  kept: KeptVolume[];
  listenersAdded: ListenerConfig[];
  listenersRemoved: ListenerConfig[];
  /** Why the new file cannot be applied to the running daemon; empty when it can. */
  refusals: string[];
}

/** A listener is what it was configured as: its front end's label (the provider, or iscsi), address, port (0 stays "any free port"). */
export function listenerKey(l: ListenerConfig): string {
  return listenerName(l);
}

function backingText(v: VolumeConfig): string {
  return kindOf(v.backing).where(v.backing);
}

function sizeOf(v: VolumeConfig): number | undefined {
  return kindOf(v.backing).configuredSize(v.backing);
}

/** The reasons a served volume cannot become `to`; none when only its ACL or size grew. */
export function volumeRefusals(from: VolumeConfig, to: VolumeConfig): string[] {
  const out: string[] = [];
  const fixed = (what: string, a: unknown, b: unknown): void => {
    if (a !== b) out.push(`volume ${from.name}: ${what} cannot change from ${String(a)} to ${String(b)} while it is served`);
  };
  fixed('the backing store', backingText(from), backingText(to));
  fixed('lun', from.lun, to.lun);
  fixed('nsid', from.nsid ?? '(LUN + 1)', to.nsid ?? '(LUN + 1)');
  fixed('block_size', from.blockSize, to.blockSize);
  fixed('physical_block_size', from.physicalBlockSize ?? 4096, to.physicalBlockSize ?? 4096);
  fixed('read_only', from.readOnly, to.readOnly);
  fixed('direct', from.direct, to.direct);
  fixed('io_engine', from.ioEngine, to.ioEngine);
  fixed('thin', from.thin, to.thin);
  fixed('uuid', from.uuid ?? '(generated)', to.uuid ?? '(generated)');
  fixed('serial', from.serial ?? '(from the uuid)', to.serial ?? '(from the uuid)');
  // Published to each connection's fast path when the volume is opened (docs/target.md "Fast path").
  if (from.backing.kind === 'rbd' && to.backing.kind === 'rbd') fixed('rbd.fast_path', from.backing.fastPath, to.backing.fastPath);
  const a = sizeOf(from);
  const b = sizeOf(to);
  // The loader refuses a file larger than its size; a RAM volume has only its config to go by.
  if (from.backing.kind === 'memory' && to.backing.kind === 'memory' && a !== undefined && b !== undefined && b < a) {
    out.push(`volume ${from.name}: size cannot shrink from ${formatSize(a)} to ${formatSize(b)}; rblkd never shrinks a volume`);
  }
  return out.map((r) => `${r} (remove it in one reload and add it back in the next)`);
}

export function planReload(current: Config, next: Config): ReloadPlan {
  const before = new Map(current.volumes.map((v) => [v.name, v]));
  const after = new Map(next.volumes.map((v) => [v.name, v]));
  const plan: ReloadPlan = { added: [], removed: [], kept: [], listenersAdded: [], listenersRemoved: [], refusals: [] };
  for (const v of current.volumes) if (!after.has(v.name)) plan.removed.push(v);
  for (const v of next.volumes) {
    const from = before.get(v.name);
    if (from === undefined) {
      plan.added.push(v);
      continue;
    }
    plan.kept.push({ from, to: v });
    plan.refusals.push(...volumeRefusals(from, v));
  }
  // The threads start with the daemon (docs/target.md "Reactors").
  if (current.reactors !== next.reactors) {
    plan.refusals.push(`reactors cannot change from ${String(current.reactors)} to ${String(next.reactors)} while rblkd runs (restart it)`);
  }
  // Every logical unit is built with or without target port groups (INQUIRY TPGS); their states may change, their presence may not.
  if ((current.alua === null) !== (next.alua === null)) {
    plan.refusals.push(`alua cannot be ${next.alua === null ? 'removed' : 'added'} while rblkd runs (restart it); a reload may change the groups and their states`);
  }
  const oldKeys = new Set(current.listeners.map(listenerKey));
  const newKeys = new Set(next.listeners.map(listenerKey));
  plan.listenersAdded = next.listeners.filter((l) => !oldKeys.has(listenerKey(l)));
  plan.listenersRemoved = current.listeners.filter((l) => !newKeys.has(listenerKey(l)));
  return plan;
}
