// Commands a virtual disk accepts without doing anything: TEST UNIT READY
// (SPC-5 6.47), START STOP UNIT (SBC-4 5.25) and PREVENT ALLOW MEDIUM REMOVAL
// (SPC-5 6.15). The medium is always present and spinning.
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { defineCommand, noData } from '../command-spec.js';
import { good } from '../outcome.js';

export const testUnitReady = defineCommand<null>({
  opcode: Opcode.TEST_UNIT_READY,
  name: 'TEST UNIT READY',
  cdbLength: 6,
  usage: [Opcode.TEST_UNIT_READY, 0, 0, 0, 0, 0x00],
  pr: 'exempt',
  access: 'read',
  parse: () => noData(null),
  execute: () => good(),
});

export const startStopUnit = defineCommand<null>({
  opcode: Opcode.START_STOP_UNIT,
  name: 'START STOP UNIT',
  cdbLength: 6,
  usage: [Opcode.START_STOP_UNIT, 0x01, 0, 0x0f, 0xf7, 0x00],
  pr: 'exempt',
  access: 'read',
  parse: () => noData(null),
  execute: () => good(),
});

export const preventAllowMediumRemoval = defineCommand<null>({
  opcode: Opcode.PREVENT_ALLOW_MEDIUM_REMOVAL,
  name: 'PREVENT ALLOW MEDIUM REMOVAL',
  cdbLength: 6,
  usage: [Opcode.PREVENT_ALLOW_MEDIUM_REMOVAL, 0, 0, 0, 0x03, 0x00],
  pr: 'exempt',
  access: 'read',
  parse: () => noData(null),
  execute: () => good(),
});
