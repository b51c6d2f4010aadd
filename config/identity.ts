// A volume's identity must not change between restarts: Linux names /dev/disk/by-id links and
// multipath maps after the Device Identification VPD page (SPC-5, 0x83), and a changed one looks like a
// different disk. A uuid from the config wins; then, for storage that several gateways serve
// (an RBD image), a name-based UUID of what every host knows it by, so that all of them report
// one device; otherwise one is generated once and kept in state_dir/identity/<volume name>.uuid.

import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { VolumeConfig } from './schema.js';

export interface VolumeIdentity {
  /** Lower-case RFC 4122 UUID. */
  uuid: string;
  /** Unit Serial Number VPD page (SPC-5, 0x80): at most 20 ASCII characters. */
  serial: string;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function identityFile(stateDir: string, volumeName: string): string {
  return join(stateDir, 'identity', `${volumeName}.uuid`);
}

/** The namespace of rblk's name-based UUIDs (RFC 4122 4.3): a random UUID, fixed forever. */
const RBLK_NAMESPACE = Buffer.from('3c1f8e0a5b7d4e2f9a6c0d1e2f3a4b5c', 'hex');

/** RFC 4122 version 5 (SHA-1) UUID of name in rblk's namespace. */
export function nameUuid(name: string): string {
  const h = createHash('sha1').update(RBLK_NAMESPACE).update(name, 'utf8').digest().subarray(0, 16);
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/**
 * The configured identity; else the one derived from `shared` (Backend.sharedIdentity, such as
 * an RBD image's cluster, pool and image ids); else the one kept in the state directory, made on
 * first use.
 */
export async function volumeIdentity(
  stateDir: string,
  volume: Pick<VolumeConfig, 'name' | 'uuid' | 'serial'>,
  shared?: string,
): Promise<VolumeIdentity> {
  const uuid = volume.uuid ?? (shared !== undefined ? nameUuid(shared) : await storedUuid(identityFile(stateDir, volume.name)));
  return { uuid, serial: volume.serial ?? uuid.replace(/-/g, '').slice(0, 16) };
}

async function storedUuid(file: string): Promise<string> {
  try {
    const text = (await readFile(file, 'utf8')).trim().toLowerCase();
    if (!UUID_RE.test(text)) throw new Error(`${file} does not hold a UUID; remove it to generate a new identity`);
    return text;
  } catch (e) {
    if (!(typeof e === 'object' && e !== null && 'code' in e && e.code === 'ENOENT')) throw e;
  }
  const uuid = randomUUID();
  await mkdir(dirname(file), { recursive: true, mode: 0o755 });
  // Written aside and renamed, so a crash never leaves a half-written identity behind.
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${uuid}\n`, { mode: 0o644 });
  await rename(tmp, file);
  return uuid;
}
