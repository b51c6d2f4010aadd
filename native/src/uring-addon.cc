// Entry of rblk_uring.node: the io_uring ring alone, so that a host without
// liburing loses only the ring (the backends fall back to the thread pool)
// and not the fabric. native/binding.ts loads it on first use.
#include <napi.h>

#include "io-ring.h"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("IoRing", rblk::IoRing::Init(env));
  return exports;
}

NODE_API_MODULE(rblk_uring, Init)
