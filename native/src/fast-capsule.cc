#include "fast-capsule.h"

namespace rblk {

namespace {
// docs/protocol.md "Common header", "CMD" and "RSP".
constexpr uint8_t kVersion = 1;
constexpr uint8_t kOpCmd = 0x02;
constexpr uint8_t kOpRsp = 0xc1;
constexpr uint8_t kSimple = 0;
constexpr uint8_t kDirWrite = 1;
constexpr uint8_t kDirRead = 2;
constexpr uint8_t kFormatDirect = 1;
constexpr uint8_t kFormatImmediate = 3;
constexpr size_t kCmdFixed = 48;
constexpr size_t kDescriptorSize = 24;

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

bool DecodeFastCapsule(const uint8_t* buf, size_t len, const FastLimits& limits, FastCapsule* out) {
  if (len < kCmdFixed || len > limits.max_capsule) return false;
  if (buf[0] != kOpCmd || buf[1] != kVersion) return false;
  if (Be16(buf + 2) != 0) return false;      // CMD defines no flags
  if (Be32(buf + 4) != len) return false;    // the length field is the SEND's length
  // LUN (SAM-5 4.7.7, protocol/wire/fields.ts readLun): single level, canonical.
  for (size_t i = 18; i < 24; ++i)
    if (buf[i] != 0) return false;
  uint32_t lun;
  if (buf[16] == 0) lun = buf[17];
  else if ((buf[16] >> 6) == 1 && (lun = (static_cast<uint32_t>(buf[16] & 0x3f) << 8) | buf[17]) >= 256) {
  } else return false;
  if (buf[24] != kSimple) return false;
  uint8_t direction = buf[25], format = buf[26], count = buf[27];
  uint32_t data_length = Be32(buf + 28);
  if (data_length > limits.max_transfer) return false;
  if (direction != kDirRead && direction != kDirWrite) return false;
  out->immediate = false;
  out->address = 0;
  out->key = 0;
  if (format == kFormatDirect) {
    if (count != 1 || len != kCmdFixed + kDescriptorSize) return false;
    const uint8_t* d = buf + kCmdFixed;
    uint64_t address = Be64(d), key = Be64(d + 8);
    uint32_t length = Be32(d + 16);
    if (Be32(d + 20) != 0 || length == 0 || length != data_length) return false;
    if (address > UINT64_MAX - length + 1) return false;  // the range would run past 2^64
    out->address = address;
    out->key = key;
  } else if (format == kFormatImmediate) {
    if (direction != kDirWrite || count != 0 || data_length == 0 || data_length > limits.max_immediate) return false;
    if (len != kCmdFixed + data_length) return false;
    out->immediate = true;
  } else {
    return false;
  }
  out->tag = Be64(buf + 8);
  out->lun = lun;
  out->write = direction == kDirWrite;
  out->data_length = data_length;
  out->cdb = buf + 32;
  return true;
}

void EncodeGoodResponse(uint8_t* buf, uint64_t tag) {
  buf[0] = kOpRsp;
  buf[1] = kVersion;
  buf[2] = 0;
  buf[3] = 0;
  Put32(buf + 4, kGoodResponseSize);
  Put32(buf + 8, static_cast<uint32_t>(tag >> 32));
  Put32(buf + 12, static_cast<uint32_t>(tag));
  Put32(buf + 16, 1);  // credit delta
  for (size_t i = 20; i < kGoodResponseSize; ++i) buf[i] = 0;  // GOOD, no sense, no residuals
}

}  // namespace rblk
