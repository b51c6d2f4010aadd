// sd_notify(3) from libsystemd: node's dgram cannot send on AF_UNIX datagram
// sockets, so the daemon's READY=1 / RELOADING=1 / STOPPING=1 / WATCHDOG=1
// messages go through here.
#include <sys/uio.h>
#include <systemd/sd-daemon.h>
// Without it sd_journal_sendv adds CODE_FILE= and CODE_LINE= of this file, the same for every line.
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include <string>
#include <vector>

#include "sd-notify.h"

namespace rblk {

namespace {
Napi::Value SdNotify(const Napi::CallbackInfo& info) {
  if (!info[0].IsString()) throw Napi::TypeError::New(info.Env(), "sdNotify: state must be a string");
  std::string state = info[0].As<Napi::String>().Utf8Value();
  // unset_environment=0: reloads must still find NOTIFY_SOCKET.
  return Napi::Number::New(info.Env(), sd_notify(0, state.c_str()));
}

// sd_journal_sendv(3): one journal entry from ["MESSAGE=...", "PRIORITY=3",
// "PEER=...", ...], so that journalctl can filter on the fields
// (docs/operations.md "Logs and the journal"). Returns 0 or -errno.
Napi::Value SdJournalSend(const Napi::CallbackInfo& info) {
  if (!info[0].IsArray()) throw Napi::TypeError::New(info.Env(), "sdJournalSend: fields must be an array of KEY=value strings");
  auto arr = info[0].As<Napi::Array>();
  std::vector<std::string> fields;
  fields.reserve(arr.Length());
  for (uint32_t i = 0; i < arr.Length(); i++) {
    Napi::Value v = arr.Get(i);
    if (!v.IsString()) throw Napi::TypeError::New(info.Env(), "sdJournalSend: every field must be a string");
    fields.push_back(v.As<Napi::String>().Utf8Value());
  }
  std::vector<iovec> iov(fields.size());
  for (size_t i = 0; i < fields.size(); i++) iov[i] = {fields[i].data(), fields[i].size()};
  return Napi::Number::New(info.Env(), sd_journal_sendv(iov.data(), static_cast<int>(iov.size())));
}
}  // namespace

void InitSdNotify(Napi::Env env, Napi::Object exports) {
  exports.Set("sdNotify", Napi::Function::New(env, SdNotify, "sdNotify"));
  exports.Set("sdJournalSend", Napi::Function::New(env, SdJournalSend, "sdJournalSend"));
}

}  // namespace rblk
