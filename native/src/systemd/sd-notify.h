#pragma once
#include <napi.h>

namespace rblk {
void InitSdNotify(Napi::Env env, Napi::Object exports);
}
