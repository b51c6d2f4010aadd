// sd_notify(3) from libsystemd: node's dgram cannot send on AF_UNIX datagram
// sockets, so the daemon's READY=1 / RELOADING=1 / STOPPING=1 / WATCHDOG=1
// messages go through here.
#include <systemd/sd-daemon.h>

#include "sd-notify.h"

namespace rblk {

namespace {
Napi::Value SdNotify(const Napi::CallbackInfo& info) {
  if (!info[0].IsString()) throw Napi::TypeError::New(info.Env(), "sdNotify: state must be a string");
  std::string state = info[0].As<Napi::String>().Utf8Value();
  // unset_environment=0: reloads must still find NOTIFY_SOCKET.
  return Napi::Number::New(info.Env(), sd_notify(0, state.c_str()));
}
}  // namespace

void InitSdNotify(Napi::Env env, Napi::Object exports) {
  exports.Set("sdNotify", Napi::Function::New(env, SdNotify, "sdNotify"));
}

}  // namespace rblk
