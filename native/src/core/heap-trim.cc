#include "heap-trim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace rblk {

// glibc keeps what a burst of connections freed: the provider's per-endpoint
// allocations land in the middle of an arena's heap (only its top is trimmed on
// free), and once a large block has been freed the dynamic mmap threshold
// serves later ones from the heap too. Measured here: 50 held connections that
// rblkd then dropped left RSS 23 MiB up 35 s later; malloc_trim(0) gave all of
// it back (docs/architecture.md, "Memory"). It walks every arena under its lock,
// so rblkd calls it at most once a second, after connections end.
Napi::Value TrimHeap(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
  return Napi::Boolean::New(info.Env(), malloc_trim(0) != 0);
#else
  return Napi::Boolean::New(info.Env(), false);
#endif
}

}  // namespace rblk
