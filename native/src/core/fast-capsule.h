// The one capsule shape the target's native fast path takes without asking
// JavaScript (docs/target.md "Fast path"): a CMD with a SIMPLE task attribute
// whose data is one direct descriptor, or immediate data for a write. The rule
// is one-sided: whatever this accepts, the strict TypeScript decoder
// (protocol/wire/command.ts) accepts with the same fields, and anything else,
// malformed or merely unusual, is left to JavaScript untouched, which then
// decodes it (and refuses it) exactly as it always has. So this file never
// reports a protocol violation; it only says "mine" or "not mine".
// test/native/fast-decode.test.ts drives it with the capsule fuzz corpus.
#pragma once
#include <cstddef>
#include <cstdint>

#include "wire-layout.h"

namespace rblk {

struct FastLimits {
  uint32_t max_capsule = 0;    // the negotiated largest initiator capsule
  uint32_t max_transfer = 0;   // largest data length of one CMD
  uint32_t max_immediate = 0;  // largest immediate write data
};

struct FastCapsule {
  uint64_t tag = 0;
  uint32_t lun = 0;
  bool write = false;         // data direction WRITE (else READ)
  bool immediate = false;     // data in the capsule, from offset 48
  uint64_t address = 0;       // direct descriptor (when !immediate)
  uint64_t key = 0;
  uint32_t data_length = 0;
  const uint8_t* cdb = nullptr;  // 16 bytes inside the capsule
};

// True when the capsule is a CMD of the fast shape, with *out filled in.
bool DecodeFastCapsule(const uint8_t* buf, size_t len, const FastLimits& limits, FastCapsule* out);

// What a received message is on a connection of version 5 or later
// (docs/protocol.md §5.1), framed exactly as protocol/wire/train.ts
// splitTrain frames it: one capsule by its first length field (or too short
// to have one); a train of CMDs, each framed by its own length field, the last
// ending at the message's end; or a malformed train, which JavaScript refuses.
enum class TrainShape { kSingle, kTrain, kMalformed };
TrainShape ScanTrain(const uint8_t* buf, size_t len);
// The length field of the capsule at p (a train's capsule, once ScanTrain said kTrain).
uint32_t CapsuleLength(const uint8_t* p);

// The 32-byte RSP for GOOD with no sense and no residuals, returning one credit
// (docs/protocol.md "RSP"): the only response the fast path builds.
constexpr size_t kGoodResponseSize = wire::kRspFixed;
void EncodeGoodResponse(uint8_t* buf, uint64_t tag);

}  // namespace rblk
