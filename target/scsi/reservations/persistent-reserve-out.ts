// PERSISTENT RESERVE OUT (SPC-5 6.17) with the basic 24-byte parameter list.
// The state machine is pr-state.ts's, run against the LU's reservation store
// (reservation-store.ts): the command completes once the new state is stored.
// This file checks the CDB and the list. SPEC_I_PT, ALL_TG_PT and APTPL are not supported (REPORT CAPABILITIES
// says so), so setting them is INVALID FIELD IN PARAMETER LIST; REGISTER AND
// MOVE is not in the table.
import { PR_OUT_PARAMETER_LENGTH } from '../../../protocol/scsi/cdb.js';
import { isPrType, Opcode, PrOutAction, PrOutFlag } from '../../../protocol/scsi/opcodes.js';
import { PARAMETER_LIST_LENGTH_ERROR } from '../../../protocol/scsi/sense-codes.js';
import { dataOut, defineCommand, type CommandEntry } from '../command-spec.js';
import { check, invalidCdb, invalidParameter, RESERVATION_CONFLICT, type Outcome } from '../outcome.js';

interface PrOutParams {
  scope: number;
  type: number;
}

const NAMES: Record<number, string> = {
  [PrOutAction.REGISTER]: 'REGISTER',
  [PrOutAction.RESERVE]: 'RESERVE',
  [PrOutAction.RELEASE]: 'RELEASE',
  [PrOutAction.CLEAR]: 'CLEAR',
  [PrOutAction.PREEMPT]: 'PREEMPT',
  [PrOutAction.PREEMPT_AND_ABORT]: 'PREEMPT AND ABORT',
  [PrOutAction.REGISTER_AND_IGNORE_EXISTING_KEY]: 'REGISTER AND IGNORE EXISTING KEY',
};

/** Service actions that act on a reservation, and so need a valid scope and type. */
const USES_TYPE = new Set<number>([PrOutAction.RESERVE, PrOutAction.RELEASE, PrOutAction.PREEMPT, PrOutAction.PREEMPT_AND_ABORT]);

function prOut(sa: number): CommandEntry {
  return defineCommand<PrOutParams>({
    opcode: Opcode.PERSISTENT_RESERVE_OUT,
    serviceAction: sa,
    name: `PERSISTENT RESERVE OUT / ${NAMES[sa]}`,
    cdbLength: 10,
    usage: [Opcode.PERSISTENT_RESERVE_OUT, sa, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x00],
    pr: 'exempt',
    access: 'shared-state',
    exclusive: true,
    parse(cdb) {
      const scope = cdb[2] >> 4;
      const type = cdb[2] & 0x0f;
      if (USES_TYPE.has(sa)) {
        // Only LU_SCOPE exists in SPC-5 (6.17.3).
        if (scope !== 0) return invalidCdb(2, 7);
        if (!isPrType(type)) return invalidCdb(2, 3);
      }
      if (cdb.readUInt32BE(5) !== PR_OUT_PARAMETER_LENGTH) return check(PARAMETER_LIST_LENGTH_ERROR);
      return dataOut(PR_OUT_PARAMETER_LENGTH, { scope, type });
    },
    execute(p, io): Outcome | Promise<Outcome> {
      const pr = io.lu.reservations;
      // Persistent reservations and RESERVE(6) do not mix (SPC-5 5.14.3).
      if (pr.legacyHolder !== undefined) return RESERVATION_CONFLICT;
      const list = io.data;
      const key = list.readBigUInt64BE(0);
      const saKey = list.readBigUInt64BE(8);
      const flags = list[20];
      if (flags & PrOutFlag.SPEC_I_PT) return invalidParameter(20, 3);
      if (flags & PrOutFlag.ALL_TG_PT) return invalidParameter(20, 2);
      if (flags & PrOutFlag.APTPL) return invalidParameter(20, 0);
      const me = io.nexusKey;
      const who = { nexusKey: me, initiator: io.nexus.initiator, ...(io.nexus.targetPort === undefined ? {} : { targetPort: io.nexus.targetPort }) };
      const type = p.type;
      switch (sa) {
        case PrOutAction.REGISTER:
          return pr.register(who, key, saKey, false);
        case PrOutAction.REGISTER_AND_IGNORE_EXISTING_KEY:
          return pr.register(who, key, saKey, true);
        case PrOutAction.CLEAR:
          return pr.clear(me, key);
      }
      if (!isPrType(type)) return invalidCdb(2, 3);
      switch (sa) {
        case PrOutAction.RESERVE:
          return pr.reserve(me, key, type, p.scope);
        case PrOutAction.RELEASE:
          return pr.release(me, key, type, p.scope);
        default:
          // PREEMPT AND ABORT also aborts the preempted nexuses' tasks (SPC-5
          // 5.14.11.4.5); rblk completes commands quickly and has no task set
          // to abort from here, so it behaves as PREEMPT.
          return pr.preempt(me, key, saKey, type, p.scope);
      }
    },
  });
}

export const persistentReserveOut: readonly CommandEntry[] = Object.keys(NAMES).map((sa) => prOut(Number(sa)));
