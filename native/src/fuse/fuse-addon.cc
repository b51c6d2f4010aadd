// Entry of rblk_fuse.node: the libfuse3 session alone, so that a host without
// libfuse3 loses only `rblk attach --fuse` and `rblk mount`. native/binding.ts
// loads it on first use.
#include <napi.h>

#include "fuse-session.h"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  rblk::InitFuse(env, exports);
  return exports;
}

NODE_API_MODULE(rblk_fuse, Init)
