// Entry of rblk_uring.node: the io_uring ring alone, so that a host without
// liburing loses only the ring (the backends fall back to the thread pool)
// and not the fabric. native/binding.ts loads it on first use.
#include <napi.h>

#include "io-ring.h"
#include "uring-c-api.h"

namespace rblk {
const UringApi* GetUringApi();
}

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("IoRing", rblk::IoRing::Init(env));
  // The C table the core addon's fast path drives its ring with (uring-c-api.h).
  exports.Set("fastRingApi", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
    return Napi::External<rblk::UringApi>::New(info.Env(), const_cast<rblk::UringApi*>(rblk::GetUringApi()));
  }, "fastRingApi"));
  return exports;
}

NODE_API_MODULE(rblk_uring, Init)
