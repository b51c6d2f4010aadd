// What each command needs from the nexus's access to a logical unit, and the
// one check that enforces it (docs/target.md, "Access by command"). Every
// entry in the command table declares one of three classes:
// - 'read': changes nothing another initiator can observe (reads, queries,
//   a flush of data already written, per-nexus state such as REQUEST SENSE);
// - 'write': changes the medium (SBC-4 4.11: what write protection prevents);
// - 'shared-state': changes no block but changes state that every other
//   initiator sees: mode pages (SPC-5 6.11; rblk keeps one set per LU and
//   raises 2A/01 to the others), persistent reservations and RESERVE(6)
//   (SPC-5 5.14: a reservation decides what other nexuses may do).
// A nexus with 'ro' access, or any nexus of a read-only LU, may run 'read'
// commands only. Both refused classes answer DATA PROTECT, WRITE PROTECTED
// (07 27/00): docs/target.md gives the reasons for one sense for both. While
// the Control page's SWP is set (mode-pages.ts), 'write' commands answer
// DATA PROTECT, LOGICAL UNIT SOFTWARE WRITE PROTECTED (07 27/02, SPC-5 7.5.8);
// 'shared-state' ones still run, so that a MODE SELECT can clear it.
import { SOFTWARE_WRITE_PROTECTED, WRITE_PROTECTED } from '../../protocol/scsi/sense-codes.js';
import type { Access } from './nexus.js';
import { check, type Failure } from './outcome.js';

export type RequiredAccess = 'read' | 'write' | 'shared-state';

export const REQUIRED_ACCESS: readonly RequiredAccess[] = ['read', 'write', 'shared-state'];

/**
 * The refusal for a command that needs `required` from a nexus granted
 * `granted` on an LU, or undefined when it may run. A read-only LU makes every
 * nexus read-only.
 */
export function accessRefusal(required: RequiredAccess, granted: Access, luReadOnly: boolean, softwareWriteProtect = false): Failure | undefined {
  if (required === 'read') return undefined;
  if (granted !== 'rw' || luReadOnly) return check(WRITE_PROTECTED);
  if (required === 'write' && softwareWriteProtect) return check(SOFTWARE_WRITE_PROTECTED);
  return undefined;
}
