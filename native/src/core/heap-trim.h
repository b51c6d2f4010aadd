// Giving freed heap memory back to the kernel (docs/architecture.md, "Memory").
#pragma once
#include <napi.h>

namespace rblk {

// trimHeap() → whether the allocator returned any memory: malloc_trim(0) on
// glibc, false where there is no such call.
Napi::Value TrimHeap(const Napi::CallbackInfo& info);

}  // namespace rblk
