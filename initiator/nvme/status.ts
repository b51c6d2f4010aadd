// NVMe status → the rblk library's error codes (initiator/errors.ts), the NVMe
// counterpart of errorForStatus's SCSI mapping, and which statuses a retry can
// cure (Base 2.0 §4.6.1.2: DNR clear, and a status that names a passing state).
import type { NvmeStatus } from '../../protocol/nvme/command.js';
import { RblkError, type RblkErrorCode } from '../errors.js';
import { describeStatus } from './queue.js';

/** The code for a completion that failed (Base 2.0 §4.6.1.2.1-§4.6.1.2.4; NVM Command Set 1.0 §2.1.2). */
function codeFor(s: NvmeStatus): RblkErrorCode {
  if (s.sct === 0) {
    switch (s.sc) {
      case 0x80:
        return 'LBA_OUT_OF_RANGE';
      case 0x81:
        return 'NO_SPACE';
      case 0x20:
        return 'WRITE_PROTECTED';
      case 0x01:
        return 'NOT_SUPPORTED';
      case 0x02:
      case 0x0b:
      case 0x0f:
        return 'INVALID';
      case 0x83:
        return 'RESERVATION_CONFLICT';
      case 0x07:
      case 0x08:
        return 'ABORTED';
      default:
        return 'IO_ERROR';
    }
  }
  if (s.sct === 2) return s.sc === 0x85 ? 'MISCOMPARE' : 'MEDIUM_ERROR';
  if (s.sct === 3) return 'CONNECTION_LOST';
  return 'IO_ERROR';
}

export function errorForNvmeStatus(what: string, s: NvmeStatus): RblkError {
  return new RblkError(codeFor(s), `${what}: ${describeStatus(s)}`, { nvme: s });
}

/**
 * Whether the same command may succeed if sent again, on this path or another:
 * no DNR, and Namespace Not Ready (82h: a draining queue), Transient
 * Transport Error (22h), Command Aborted due to SQ Deletion (08h), or an
 * Asymmetric Access path status (SCT 3h, Base 2.0 §8.20.3.5: another path may serve it).
 */
export function retryable(s: NvmeStatus): boolean {
  if (s.dnr === true) return false;
  if (s.sct === 3) return true;
  return s.sct === 0 && (s.sc === 0x82 || s.sc === 0x22 || s.sc === 0x08);
}
