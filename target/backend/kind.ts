// What one kind of backing store brings to rblkd (docs/backends.md): the volume keys it adds
// to the config schema, its checks when the config is loaded (no native code, so that
// --check-config runs anywhere), how it opens, and how a larger configured size reaches it.
// Every kind is registered once, in registry.ts; config/ and target/daemon/ ask the registry
// and never name a kind themselves.

import type { SchemaObject } from 'ajv';
import type { Backend } from './backend.js';
import type { IoEngineChoice } from './positional-io.js';

/** Where a volume's blocks live, as the loader resolved it: `kind` names its BackendKind. */
export interface BackingBase {
  readonly kind: string;
}

/** What the loader hands a kind: the volume's keys, the checks already done, and where to report. */
export interface KindInput {
  /** A key of the volume as written, or undefined when it is absent or the schema rejected it. */
  get(key: string): unknown;
  /** volumes[i].<key> (or the nested path) when key is given, else volumes[i]. */
  error(key: string | readonly string[] | undefined, message: string): void;
  warn(key: string | readonly string[] | undefined, message: string): void;
  name: string | undefined;
  /** The size key in bytes, when given and valid (a multiple of block_size, not zero). */
  size: number | undefined;
  /** The size key was written, valid or not (an invalid one is already reported). */
  sizeGiven: boolean;
  readOnly: boolean;
  blockSize: number;
  /** Relative backing paths are taken from here. */
  stateDir: string;
  /** Relative paths of other files (a ceph.conf, a keyring) are taken from here: the config file's directory. */
  configDir: string;
}

/** What the daemon passes to open, besides the backing: the volume's common settings. */
export interface OpenOptions {
  name: string;
  readOnly: boolean;
  direct: boolean;
  ioEngine: IoEngineChoice;
  logicalBlockSize: number;
  /**
   * Several gateways serve this store (the config has `alua`), so it is not locked against a
   * second daemon; otherwise a file or block device is (docs/backends.md "One daemon per store").
   */
  sharedStore: boolean;
}

export interface BackendKind<B extends BackingBase = BackingBase> {
  readonly kind: B['kind'];
  /** The volume key that selects this kind. Kinds may share one (path: file or block device). */
  readonly key: string;
  /** How the key is written in messages: `path`, `'memory: true'`, `rbd`. */
  readonly keyText: string;
  /** What the key names, in "needs ..." messages: `a file or block device`; empty when keyText says it. */
  readonly describes: string;
  /** Whether the volume selects this kind's key (memory: only when it is true). */
  selected(value: unknown): boolean;
  /** JSON Schema of the volume keys this kind brings, its key included; shared keys are merged. */
  readonly properties: Readonly<Record<string, SchemaObject>>;
  /** direct and io_engine apply (the descriptor backends). */
  readonly descriptorOptions: boolean;
  /**
   * Config time: checks the keys and what they name on this host. Returns the backing;
   * undefined when something was reported; null when the volume is not of this kind after all
   * (a path that names a file is not a block device), so the next kind with the key is asked.
   */
  resolve(input: KindInput): B | undefined | null;
  /** Two volumes must not share storage: the text that identifies it (a path, pool/image). */
  claim(backing: B): string | undefined;
  /** For logs and reload refusals: `file /srv/a.img`, `memory`, `rbd rbd/db0`. */
  where(backing: B): string;
  /** The size the config asks for, when it asks; a reload may grow it. */
  configuredSize(backing: B): number | undefined;
  /** Default of `direct` for this kind. */
  defaultDirect(backing: B): boolean;
  open(backing: B, options: OpenOptions): Promise<Backend>;
  /**
   * Makes the store at least `size` bytes (a reload raised the configured size); the caller
   * then re-reads the capacity. Absent: the store decides its size itself.
   */
  grow?(backing: B, backend: Backend, size: number): Promise<void>;
}

/**
 * An on/off key's one spelling (docs/operations.md "The configuration file"): true or
 * false, with on and off read the same, at every level that has such a key.
 */
export const SWITCH_SCHEMA = { enum: [true, false, 'on', 'off'] } as const;

/** A switch key's value, or `fallback` when it is absent. */
export function switchOn(v: unknown, fallback: boolean): boolean {
  if (v === true || v === 'on') return true;
  if (v === false || v === 'off') return false;
  return fallback;
}
