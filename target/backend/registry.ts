// Every kind of backing store rblkd knows, registered once (docs/backends.md "Adding a kind").
// The config schema takes its volume keys from here, the loader asks each kind to resolve the
// volumes that select it, and the daemon opens and grows volumes through their kind.

import type { SchemaObject } from 'ajv';
import type { Backend } from './backend.js';
import type { BackendKind, OpenOptions } from './kind.js';
import { memoryKind } from './kinds/memory-kind.js';
import { blockDeviceKind, fileKind } from './kinds/path-kinds.js';
import { rbdKind } from './rbd/rbd-kind.js';

/** In the order the loader asks them: of the kinds sharing a key, the first to claim a volume wins. */
export const BACKEND_KINDS = [blockDeviceKind, fileKind, memoryKind, rbdKind] as const;

type BackingOf<K> = K extends BackendKind<infer B> ? B : never;
/** Where a volume's blocks live: the backing of one registered kind. */
export type VolumeBacking = BackingOf<(typeof BACKEND_KINDS)[number]>;

/** The kind of a resolved backing. */
export function kindOf(backing: VolumeBacking): BackendKind<VolumeBacking> {
  const kind = BACKEND_KINDS.find((k) => k.kind === backing.kind);
  if (kind === undefined) throw new Error(`no backend kind '${backing.kind}' is registered`);
  return kind as unknown as BackendKind<VolumeBacking>;
}

/** The volume keys every kind brings, for config/schema.ts; kinds sharing a key share its schema. */
export function kindProperties(): Record<string, SchemaObject> {
  const out: Record<string, SchemaObject> = {};
  for (const k of BACKEND_KINDS) Object.assign(out, k.properties);
  return out;
}

/** The distinct selecting keys, in registration order, each with the kinds behind it. */
export function kindKeys(): Array<{ key: string; kinds: ReadonlyArray<BackendKind<VolumeBacking>> }> {
  const out = new Map<string, Array<BackendKind<VolumeBacking>>>();
  for (const k of BACKEND_KINDS) {
    const list = out.get(k.key) ?? [];
    list.push(k as unknown as BackendKind<VolumeBacking>);
    out.set(k.key, list);
  }
  return [...out].map(([key, kinds]) => ({ key, kinds }));
}

export function openVolumeBackend(backing: VolumeBacking, options: OpenOptions): Promise<Backend> {
  return kindOf(backing).open(backing, options);
}
