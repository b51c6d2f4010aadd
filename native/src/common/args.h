// Checked conversions of JS arguments, shared by every class of the addon: a
// wrong type or range throws a usage error (.code, .errno, .op) instead of
// reaching a libfabric or kernel call as a silently truncated value.
#pragma once
#include <napi.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "errors.h"

namespace rblk {

inline uint64_t ToU64(Napi::Env env, Napi::Value v, const char* op, const char* what) {
  if (!v.IsBigInt()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, op, std::string(what) + " must be a bigint");
  bool lossless = false;
  uint64_t x = v.As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless) throw MakeUsageError(env, "ERR_OUT_OF_RANGE", ERANGE, op, std::string(what) + " must fit in 64 bits");
  return x;
}

inline uint32_t ToU32(Napi::Env env, Napi::Value v, const char* op, const char* what) {
  if (!v.IsNumber()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, op, std::string(what) + " must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0 && d <= 4294967295.0) || d != static_cast<double>(static_cast<uint32_t>(d)))
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", ERANGE, op, std::string(what) + " must be a 32-bit unsigned integer");
  return static_cast<uint32_t>(d);
}

// A non-negative integer a JS number holds exactly (offsets, lengths, fds).
inline int64_t ToSafeInteger(Napi::Env env, Napi::Value v, const char* op, const std::string& what) {
  if (!v.IsNumber()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, op, what + " must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0 && d <= 9007199254740991.0) || d != static_cast<double>(static_cast<int64_t>(d)))
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, op, what + " must be a non-negative integer");
  return static_cast<int64_t>(d);
}

}  // namespace rblk
