// Entry of rblk_rbd.node: librbd alone, so that a host without librbd loses
// only rbd volumes and not the fabric. native/binding.ts loads it on first use.
#include <napi.h>

#include "rbd-c-api.h"
#include "rbd-image.h"

namespace rblk {
const RbdApi* GetRbdApi();
}

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("RbdImage", rblk::RbdImage::Init(env));
  // The core addon's fast path reaches librbd through this table (rbd-c-api.h).
  exports.Set("fastRbdApi", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
    return Napi::External<rblk::RbdApi>::New(info.Env(), const_cast<rblk::RbdApi*>(rblk::GetRbdApi()));
  }, "fastRbdApi"));
  return exports;
}

NODE_API_MODULE(rblk_rbd, Init)
