// Which volumes an initiator may use, and how. The ACL is an ordered list: the first entry whose
// name or glob matches decides, and an initiator that matches none gets no access (the volume
// is not in its REPORT LUNS answer). A volume without an ACL is open, read-write, to every
// initiator that may log in at all.

import type { Access, AclEntry, VolumeConfig } from './schema.js';

/** Matches a whole initiator name against a glob where * is any run and ? any one character. */
export function globMatch(glob: string, name: string): boolean {
  const re = new RegExp(
    '^' +
      glob
        .split('')
        .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.+^${}()|[\]\\-]/g, '\\$&')))
        .join('') +
      '$',
    's',
  );
  return re.test(name);
}

export function isGlob(pattern: string): boolean {
  return pattern.includes('*') || pattern.includes('?');
}

/** The access an initiator has to a volume, or undefined for none. */
export function accessFor(volume: Pick<VolumeConfig, 'acl' | 'readOnly'>, initiator: string): Access | undefined {
  let access: Access | undefined;
  if (!volume.acl) {
    access = 'rw';
  } else {
    access = volume.acl.find((e: AclEntry) => globMatch(e.initiator, initiator))?.access;
  }
  if (access === 'rw' && volume.readOnly) return 'ro';
  return access;
}
