// Generated from protocol/wire/constants.ts by `npx tsx scripts/wire-header.ts`: do not edit.
// The capsule layout of docs/protocol.md ("Common header", "CMD", "RSP"); every
// multi-byte field is big-endian. test/protocol/wire-header.test.ts checks it is current.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rblk::wire {

constexpr uint8_t kCapsuleVersion = 1;

// Opcodes
constexpr uint8_t kOpLoginReq = 0x00;
constexpr uint8_t kOpTskMgmt = 0x01;
constexpr uint8_t kOpCmd = 0x02;
constexpr uint8_t kOpILogout = 0x03;
constexpr uint8_t kOpLoginAuth = 0x04;
constexpr uint8_t kOpKeepalive = 0x05;
constexpr uint8_t kOpCredRsp = 0x41;
constexpr uint8_t kOpTLogout = 0x80;
constexpr uint8_t kOpCredReq = 0x81;
constexpr uint8_t kOpLoginRsp = 0xc0;
constexpr uint8_t kOpRsp = 0xc1;
constexpr uint8_t kOpLoginRej = 0xc2;
constexpr uint8_t kOpLoginChallenge = 0xc3;
constexpr uint8_t kOpTskRsp = 0xc4;
constexpr uint8_t kOpKeepaliveRsp = 0xc5;

// Task attributes (CMD byte 24)
constexpr uint8_t kTaskAttributeSimple = 0;
constexpr uint8_t kTaskAttributeHeadOfQueue = 1;
constexpr uint8_t kTaskAttributeOrdered = 2;
constexpr uint8_t kTaskAttributeAca = 4;
// Data directions (CMD byte 25)
constexpr uint8_t kDirectionNone = 0;
constexpr uint8_t kDirectionWrite = 1;
constexpr uint8_t kDirectionRead = 2;
// Data formats (CMD byte 26)
constexpr uint8_t kFormatNone = 0;
constexpr uint8_t kFormatDirect = 1;
constexpr uint8_t kFormatList = 2;
constexpr uint8_t kFormatImmediate = 3;
// RSP flags (the header flags of an RSP)
constexpr uint16_t kRspFlagSnsvalid = 0x02;
constexpr uint16_t kRspFlagDoover = 0x04;
constexpr uint16_t kRspFlagDounder = 0x08;
constexpr uint16_t kRspFlagDiover = 0x10;
constexpr uint16_t kRspFlagDiunder = 0x20;

// Sizes
constexpr size_t kHeaderSize = 16;
constexpr size_t kCmdFixed = 48;
constexpr size_t kRspFixed = 32;
constexpr size_t kDescriptorSize = 24;
constexpr size_t kCdbSize = 16;

// Common header offsets
constexpr size_t kHeaderOpcode = 0;
constexpr size_t kHeaderVersion = 1;
constexpr size_t kHeaderFlags = 2;
constexpr size_t kHeaderLength = 4;
constexpr size_t kHeaderTag = 8;
// CMD offsets
constexpr size_t kCmdLun = 16;
constexpr size_t kCmdTaskAttribute = 24;
constexpr size_t kCmdDirection = 25;
constexpr size_t kCmdFormat = 26;
constexpr size_t kCmdDescriptorCount = 27;
constexpr size_t kCmdDataLength = 28;
constexpr size_t kCmdCdb = 32;
constexpr size_t kCmdData = 48;
// Data descriptor offsets, from the descriptor
constexpr size_t kDescriptorAddress = 0;
constexpr size_t kDescriptorKey = 8;
constexpr size_t kDescriptorLength = 16;
constexpr size_t kDescriptorReserved = 20;
// RSP offsets
constexpr size_t kRspCreditDelta = 16;
constexpr size_t kRspStatus = 20;
constexpr size_t kRspReserved = 21;
constexpr size_t kRspSenseLength = 22;
constexpr size_t kRspDataOutResidual = 24;
constexpr size_t kRspDataInResidual = 28;
constexpr size_t kRspSense = 32;

}  // namespace rblk::wire
