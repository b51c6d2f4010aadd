// Entry of rblk_rbd.node: librbd alone, so that a host without librbd loses
// only rbd volumes and not the fabric. native/binding.ts loads it on first use.
#include <napi.h>

#include "rbd-image.h"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("RbdImage", rblk::RbdImage::Init(env));
  return exports;
}

NODE_API_MODULE(rblk_rbd, Init)
