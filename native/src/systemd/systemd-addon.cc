// Entry of rblk_systemd.node: sd_notify(3) alone, so that a host without
// libsystemd loses only the readiness and watchdog messages. native/binding.ts
// loads it on first use.
#include <napi.h>

#include "sd-notify.h"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  rblk::InitSdNotify(env, exports);
  return exports;
}

NODE_API_MODULE(rblk_systemd, Init)
