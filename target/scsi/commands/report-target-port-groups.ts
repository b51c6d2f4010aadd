// REPORT TARGET PORT GROUPS (SPC-4 6.36): this gateway's group and the peer
// groups its config names (port-groups.ts), each with one target port. A
// logical unit without target port groups (no `alua` in the config: INQUIRY
// TPGS 00b) does not support the command, so it answers 05 20/00 as an
// unknown MAINTENANCE IN service action would.
import { MaintenanceIn, Opcode } from '../../../protocol/scsi/opcodes.js';
import { INVALID_COMMAND_OPERATION_CODE } from '../../../protocol/scsi/sense-codes.js';
import { aluaStateCode } from '../../../protocol/scsi/target-port-groups.js';
import { dataIn, defineCommand } from '../command-spec.js';
import { check, invalidCdb, respond } from '../outcome.js';
import type { PortGroup, TargetPortGroups } from '../port-groups.js';

/** U_SUP, S_SUP, AN_SUP, AO_SUP: the four states rblk can be configured in (SPC-4 table 168). */
const SUPPORTED_STATES = 0x08 | 0x04 | 0x02 | 0x01;
/** IMPLICIT TRANSITION TIME in the extended header: a reload applies at once. */
const TRANSITION_SECONDS = 0;

function descriptor(g: PortGroup, statusCode: number): Buffer {
  const d = Buffer.alloc(12);
  // PREF: the active/optimized group is the one to prefer (SPC-4 6.36.2).
  d[0] = (g.state === 'active-optimized' ? 0x80 : 0) | aluaStateCode(g.state);
  d[1] = SUPPORTED_STATES;
  d.writeUInt16BE(g.group, 2);
  d[5] = statusCode;
  d[7] = 1; // TARGET PORT COUNT
  d.writeUInt16BE(g.relativePort, 10);
  return d;
}

export function targetPortGroupsData(groups: TargetPortGroups, extended: boolean): Buffer {
  const body = Buffer.concat([descriptor(groups.local, groups.altered ? 0x02 : 0x00), ...groups.peers.map((p) => descriptor(p, 0x00))]);
  const head = Buffer.alloc(extended ? 8 : 4);
  // RETURN DATA LENGTH counts the bytes after itself (SPC-4 tables 165, 166).
  head.writeUInt32BE(head.length - 4 + body.length, 0);
  if (extended) {
    head[4] = 0x10; // FORMAT TYPE 001b
    head[5] = TRANSITION_SECONDS;
  }
  return Buffer.concat([head, body]);
}

interface RtpgParams {
  extended: boolean;
  allocationLength: number;
}

export const reportTargetPortGroups = defineCommand<RtpgParams>({
  opcode: Opcode.MAINTENANCE_IN,
  serviceAction: MaintenanceIn.REPORT_TARGET_PORT_GROUPS,
  name: 'REPORT TARGET PORT GROUPS',
  cdbLength: 12,
  usage: [Opcode.MAINTENANCE_IN, 0xe0 | MaintenanceIn.REPORT_TARGET_PORT_GROUPS, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x00],
  pr: 'exempt',
  access: 'read',
  alua: 'unavailable',
  legacyExempt: true,
  parse(cdb) {
    // PARAMETER DATA FORMAT (byte 1 bits 7:5): 000b length only, 001b extended; others reserved.
    const format = cdb[1] >> 5;
    if (format > 1) return invalidCdb(1, 7);
    const allocationLength = cdb.readUInt32BE(6);
    return dataIn(allocationLength, { extended: format === 1, allocationLength });
  },
  execute(p, io) {
    const groups = io.lu.portGroups;
    if (groups === undefined) return check(INVALID_COMMAND_OPERATION_CODE);
    return respond(io.data, targetPortGroupsData(groups, p.extended), p.allocationLength);
  },
});
