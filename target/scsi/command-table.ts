// The opcode table (as in tgt's sbc.c): every command rblk executes, looked
// up by opcode and, for the opcodes that have them, service action.
import { Opcode } from '../../protocol/scsi/opcodes.js';
import { INVALID_COMMAND_OPERATION_CODE } from '../../protocol/scsi/sense-codes.js';
import type { CommandEntry } from './command-spec.js';
import { compareAndWrite } from './commands/compare-and-write.js';
import { inquiry } from './commands/inquiry.js';
import { getLbaStatus } from './commands/lba-status.js';
import { modeSelect10, modeSelect6 } from './mode/mode-select.js';
import { modeSense10, modeSense6 } from './mode/mode-sense.js';
import { check, invalidCdb, type Failure } from './outcome.js';
import { orWrite16 } from './commands/orwrite.js';
import { persistentReserveIn } from './reservations/persistent-reserve-in.js';
import { persistentReserveOut } from './reservations/persistent-reserve-out.js';
import { readCapacity10, readCapacity16 } from './commands/read-capacity.js';
import { read10, read12, read16, read6, write10, write12, write16, write6 } from './commands/read-write.js';
import { readDefectData10, readDefectData12 } from './commands/read-defect-data.js';
import { reportLuns } from './commands/report-luns.js';
import { reportTargetPortGroups } from './commands/report-target-port-groups.js';
import { reportSupportedOperationCodes } from './commands/report-opcodes.js';
import { requestSense } from './commands/request-sense.js';
import { release6, reserve6 } from './reservations/reserve-release.js';
import { prefetch10, prefetch16, synchronizeCache10, synchronizeCache16 } from './commands/sync-cache.js';
import { preventAllowMediumRemoval, startStopUnit, testUnitReady } from './commands/unit-control.js';
import { unmap } from './commands/unmap.js';
import { verify10, verify12, verify16, writeAndVerify10, writeAndVerify12, writeAndVerify16 } from './commands/verify.js';
import { writeSame10, writeSame16 } from './commands/write-same.js';
import { writeAtomic16 } from './commands/write-atomic.js';
import { extendedCopy, receiveCopyOperatingParameters, receiveCopyStatus } from './commands/extended-copy.js';

const entries: CommandEntry[] = [
  testUnitReady,
  requestSense,
  inquiry,
  reportLuns,
  modeSense6,
  modeSense10,
  modeSelect6,
  modeSelect10,
  startStopUnit,
  preventAllowMediumRemoval,
  readCapacity10,
  readCapacity16,
  getLbaStatus,
  readDefectData10,
  readDefectData12,
  read6,
  read10,
  read12,
  read16,
  write6,
  write10,
  write12,
  write16,
  synchronizeCache10,
  synchronizeCache16,
  prefetch10,
  prefetch16,
  writeSame10,
  writeSame16,
  unmap,
  compareAndWrite,
  orWrite16,
  writeAtomic16,
  extendedCopy,
  receiveCopyStatus,
  receiveCopyOperatingParameters,
  verify10,
  verify12,
  verify16,
  writeAndVerify10,
  writeAndVerify12,
  writeAndVerify16,
  reserve6,
  release6,
  // SPC-4 5.15.2.4.4: a standby port still answers PERSISTENT RESERVE IN and OUT.
  ...persistentReserveIn.map((e): CommandEntry => ({ ...e, alua: 'standby' })),
  ...persistentReserveOut.map((e): CommandEntry => ({ ...e, alua: 'standby' })),
  reportTargetPortGroups,
];
entries.push(reportSupportedOperationCodes(() => entries));

export const COMMANDS: readonly CommandEntry[] = entries;

/** Where the service action lives: bits 4:0 of byte 1 in every CDB that has one. */
function serviceActionOf(cdb: Buffer): number {
  return cdb[1] & 0x1f;
}

const byOpcode = new Map<number, CommandEntry>();
const byServiceAction = new Map<number, Map<number, CommandEntry>>();
for (const e of entries) {
  if (e.serviceAction === undefined) {
    if (byOpcode.has(e.opcode)) throw new Error(`opcode ${e.opcode} is in the table twice`);
    byOpcode.set(e.opcode, e);
    continue;
  }
  const m = byServiceAction.get(e.opcode) ?? new Map<number, CommandEntry>();
  m.set(e.serviceAction, e);
  byServiceAction.set(e.opcode, m);
}

/**
 * The entry for a CDB. An unknown opcode, or an unknown service action of
 * SERVICE ACTION IN(16) or MAINTENANCE IN, is INVALID COMMAND OPERATION CODE
 * (05 20/00); an unknown PERSISTENT RESERVE IN/OUT service action is INVALID
 * FIELD IN CDB, as SPC-5 6.16.1 and 6.17.1 say and libiscsi's
 * PrinServiceactionRange test expects.
 */
export function lookupCommand(cdb: Buffer): CommandEntry | Failure {
  const op = cdb[0];
  const direct = byOpcode.get(op);
  if (direct) return direct;
  const bySa = byServiceAction.get(op)?.get(serviceActionOf(cdb));
  if (bySa) return bySa;
  if (op === Opcode.PERSISTENT_RESERVE_IN || op === Opcode.PERSISTENT_RESERVE_OUT) return invalidCdb(1, 4);
  return check(INVALID_COMMAND_OPERATION_CODE);
}
