// The wire layout as C++ (native/src/core/wire-layout.h), generated from constants.ts so that
// the native fast path and initiator queue never carry a hand-written copy of it
// (docs/architecture.md "The wire format, written once"). scripts/wire-header.ts writes
// the file; test/protocol/wire-header.test.ts fails when the file and this differ.
import {
  CAPSULE_VERSION,
  CapsuleSize,
  CDB_SIZE,
  CmdField,
  DataDirection,
  DataFormat,
  DESCRIPTOR_SIZE,
  DescriptorField,
  HEADER_SIZE,
  HeaderField,
  Opcode,
  ResponseFlags,
  RspField,
  TaskAttribute,
} from './constants.js';

/** LOGIN_REQ → LoginReq, I_LOGOUT → ILogout. */
function camel(name: string): string {
  return name
    .toLowerCase()
    .split('_')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('');
}

function hex(v: number, width: number): string {
  return `0x${v.toString(16).padStart(width, '0')}`;
}

function group(title: string, prefix: string, type: string, values: Record<string, number>, asHex = false): string[] {
  return [`// ${title}`, ...Object.entries(values).map(([k, v]) => `constexpr ${type} k${prefix}${camel(k)} = ${asHex ? hex(v, 2) : String(v)};`)];
}

/** The text of native/src/core/wire-layout.h. */
export function wireLayoutHeader(): string {
  const lines = [
    '// Generated from protocol/wire/constants.ts by `npx tsx scripts/wire-header.ts`: do not edit.',
    '// The capsule layout of docs/protocol.md ("Common header", "CMD", "RSP"); every',
    '// multi-byte field is big-endian. test/protocol/wire-header.test.ts checks it is current.',
    '#pragma once',
    '',
    '#include <cstddef>',
    '#include <cstdint>',
    '',
    'namespace rblk::wire {',
    '',
    `constexpr uint8_t kCapsuleVersion = ${CAPSULE_VERSION};`,
    '',
    ...group('Opcodes', 'Op', 'uint8_t', Opcode, true),
    '',
    ...group('Task attributes (CMD byte 24)', 'TaskAttribute', 'uint8_t', TaskAttribute),
    ...group('Data directions (CMD byte 25)', 'Direction', 'uint8_t', DataDirection),
    ...group('Data formats (CMD byte 26)', 'Format', 'uint8_t', DataFormat),
    ...group('RSP flags (the header flags of an RSP)', 'RspFlag', 'uint16_t', ResponseFlags, true),
    '',
    '// Sizes',
    `constexpr size_t kHeaderSize = ${HEADER_SIZE};`,
    `constexpr size_t kCmdFixed = ${CapsuleSize.CMD_FIXED};`,
    `constexpr size_t kRspFixed = ${CapsuleSize.RSP_FIXED};`,
    `constexpr size_t kDescriptorSize = ${DESCRIPTOR_SIZE};`,
    `constexpr size_t kCdbSize = ${CDB_SIZE};`,
    '',
    ...group('Common header offsets', 'Header', 'size_t', HeaderField),
    ...group('CMD offsets', 'Cmd', 'size_t', CmdField),
    ...group('Data descriptor offsets, from the descriptor', 'Descriptor', 'size_t', DescriptorField),
    ...group('RSP offsets', 'Rsp', 'size_t', RspField),
    '',
    '}  // namespace rblk::wire',
    '',
  ];
  return lines.join('\n');
}
