#include "fast-capsule.h"

namespace rblk {

namespace {
// The layout is native/src/core/wire-layout.h, generated from protocol/wire/constants.ts.
using namespace wire;

uint16_t Be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t Be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) | (static_cast<uint32_t>(p[2]) << 8) | p[3];
}
uint64_t Be64(const uint8_t* p) { return (static_cast<uint64_t>(Be32(p)) << 32) | Be32(p + 4); }
void Put32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
}  // namespace

uint32_t CapsuleLength(const uint8_t* p) { return Be32(p + kHeaderLength); }

TrainShape ScanTrain(const uint8_t* buf, size_t len) {
  if (len < kHeaderSize || Be32(buf + kHeaderLength) >= len) return TrainShape::kSingle;
  size_t off = 0;
  while (off < len) {
    if (len - off < kHeaderSize) return TrainShape::kMalformed;
    uint32_t piece = Be32(buf + off + kHeaderLength);
    if (piece < kHeaderSize || piece > len - off || buf[off + kHeaderOpcode] != kOpCmd) return TrainShape::kMalformed;
    off += piece;
  }
  return TrainShape::kTrain;
}

bool DecodeFastCapsule(const uint8_t* buf, size_t len, const FastLimits& limits, FastCapsule* out) {
  if (len < kCmdFixed || len > limits.max_capsule) return false;
  if (buf[kHeaderOpcode] != kOpCmd || buf[kHeaderVersion] != kCapsuleVersion) return false;
  if (Be16(buf + kHeaderFlags) != 0) return false;      // CMD defines no flags
  if (Be32(buf + kHeaderLength) != len) return false;   // the length field is the SEND's length
  // LUN (SAM-5 4.7.7, protocol/wire/fields.ts readLun): single level, canonical.
  const uint8_t* l = buf + kCmdLun;
  for (size_t i = 2; i < 8; ++i)
    if (l[i] != 0) return false;
  uint32_t lun;
  if (l[0] == 0) lun = l[1];
  else if ((l[0] >> 6) == 1 && (lun = (static_cast<uint32_t>(l[0] & 0x3f) << 8) | l[1]) >= 256) {
  } else return false;
  if (buf[kCmdTaskAttribute] != kTaskAttributeSimple) return false;
  uint8_t direction = buf[kCmdDirection], format = buf[kCmdFormat], count = buf[kCmdDescriptorCount];
  uint32_t data_length = Be32(buf + kCmdDataLength);
  if (data_length > limits.max_transfer) return false;
  if (direction != kDirectionRead && direction != kDirectionWrite) return false;
  out->immediate = false;
  out->address = 0;
  out->key = 0;
  if (format == kFormatDirect) {
    if (count != 1 || len != kCmdFixed + kDescriptorSize) return false;
    const uint8_t* d = buf + kCmdData;
    uint64_t address = Be64(d + kDescriptorAddress), key = Be64(d + kDescriptorKey);
    uint32_t length = Be32(d + kDescriptorLength);
    if (Be32(d + kDescriptorReserved) != 0 || length == 0 || length != data_length) return false;
    if (address > UINT64_MAX - length + 1) return false;  // the range would run past 2^64
    out->address = address;
    out->key = key;
  } else if (format == kFormatImmediate) {
    if (direction != kDirectionWrite || count != 0 || data_length == 0 || data_length > limits.max_immediate) return false;
    if (len != kCmdFixed + data_length) return false;
    out->immediate = true;
  } else {
    return false;
  }
  out->tag = Be64(buf + kHeaderTag);
  out->lun = lun;
  out->write = direction == kDirectionWrite;
  out->data_length = data_length;
  out->cdb = buf + kCmdCdb;
  return true;
}

void EncodeGoodResponse(uint8_t* buf, uint64_t tag) {
  buf[kHeaderOpcode] = kOpRsp;
  buf[kHeaderVersion] = kCapsuleVersion;
  buf[kHeaderFlags] = 0;
  buf[kHeaderFlags + 1] = 0;
  Put32(buf + kHeaderLength, kGoodResponseSize);
  Put32(buf + kHeaderTag, static_cast<uint32_t>(tag >> 32));
  Put32(buf + kHeaderTag + 4, static_cast<uint32_t>(tag));
  Put32(buf + kRspCreditDelta, 1);
  for (size_t i = kRspStatus; i < kGoodResponseSize; ++i) buf[i] = 0;  // GOOD, no sense, no residuals
}

}  // namespace rblk
