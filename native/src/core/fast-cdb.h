// The two CDB shapes the native fast path executes: READ and WRITE (10) and
// (16) (SBC-4 5.15, 5.16, 5.40, 5.41). Decoding only: whether the command is
// in range, allowed and fits is the fast path's eligibility check, and every
// CDB this does not take goes to the SCSI core in JavaScript
// (target/scsi/commands/read-write.ts), which stays the reference for what they mean.
#pragma once
#include <cstdint>

namespace rblk {

struct FastCdb {
  bool write = false;
  bool fua = false;
  uint64_t lba = 0;
  uint32_t blocks = 0;
};

// True for READ/WRITE (10)/(16) with no protection information (RDPROTECT or
// WRPROTECT 0) and no NACA: the cases read-write.ts handles without a CHECK
// CONDITION of its own. `cdb` is the capsule's 16 bytes.
bool DecodeFastCdb(const uint8_t* cdb, FastCdb* out);

}  // namespace rblk
