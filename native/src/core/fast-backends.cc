// The fast path's backend kinds (fast-backend.h): a new native backend is
// its own file, defining its FastBackendKind, and its name in the two lists
// here (docs/architecture.md "Adding a part").
#include "fast-backend.h"

namespace rblk {

extern const FastBackendKind kRbdBackend;    // fast-rbd.cc
extern const FastBackendKind kUringBackend;  // fast-uring.cc

// In the order setLun asks them: the first kind that claims a record serves it.
const FastBackendKind* const kFastBackends[] = {&kRbdBackend, &kUringBackend};
const size_t kFastBackendCount = sizeof kFastBackends / sizeof kFastBackends[0];

}  // namespace rblk
