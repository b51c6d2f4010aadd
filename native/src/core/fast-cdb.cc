#include "fast-cdb.h"

namespace rblk {

namespace {
constexpr uint8_t kRead10 = 0x28, kWrite10 = 0x2a, kRead16 = 0x88, kWrite16 = 0x8a;
constexpr uint8_t kFua = 0x08;   // byte 1 bit 3
constexpr uint8_t kNaca = 0x04;  // CONTROL byte bit 2 (SAM-5 5.2)

uint64_t Be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

bool DecodeFastCdb(const uint8_t* cdb, FastCdb* out) {
  uint8_t op = cdb[0];
  bool ten = op == kRead10 || op == kWrite10;
  bool sixteen = op == kRead16 || op == kWrite16;
  if (!ten && !sixteen) return false;
  if ((cdb[1] >> 5) != 0) return false;  // RDPROTECT/WRPROTECT: 05 24/00 from JS
  if ((cdb[ten ? 9 : 15] & kNaca) != 0) return false;
  out->write = op == kWrite10 || op == kWrite16;
  out->fua = (cdb[1] & kFua) != 0;
  out->lba = ten ? Be(cdb + 2, 4) : Be(cdb + 2, 8);
  out->blocks = static_cast<uint32_t>(ten ? Be(cdb + 7, 2) : Be(cdb + 10, 4));
  return true;
}

}  // namespace rblk
