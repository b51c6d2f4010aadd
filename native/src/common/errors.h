// Native errors reach JS as Error objects with .code, .errno and .op, in the
// manner of zeromq.js (src/util/error.h). libfabric returns negative
// FI_E* values; system calls return -1 with errno. Both become a positive errno.
#pragma once
#include <napi.h>
#include <string>

namespace rblk {

// "FI_ECONNREFUSED" for libfabric errno values, "EIO" etc. for the rest.
std::string FabricErrorName(int err);
std::string FabricErrorMessage(int err);
std::string SystemErrorName(int err);

// err is a positive errno value. fabric selects the FI_ naming.
Napi::Error MakeError(Napi::Env env, int err, const std::string& op, bool fabric = true);
// A usage error (bad argument, use after close): code is given, errno is EINVAL or EBADF.
Napi::Error MakeUsageError(Napi::Env env, const std::string& code, int err, const std::string& op,
                           const std::string& message);

// Throws a JS exception built by MakeError when rc < 0.
inline void CheckFabric(Napi::Env env, int rc, const char* op) {
  if (rc < 0) throw MakeError(env, -rc, op, true);
}

}  // namespace rblk
