// Per-environment data: the class constructors, so an argument can be checked
// with instanceof before it is unwrapped (unwrapping a foreign object would
// reinterpret its memory).
#pragma once
#include <napi.h>

#include <string>

#include "errors.h"

namespace rblk {

struct AddonData {
  Napi::FunctionReference domain;
  Napi::FunctionReference memory_region;
  Napi::FunctionReference pages;
  Napi::FunctionReference listener;
  Napi::FunctionReference endpoint;
  Napi::FunctionReference reactors;
};

template <typename T>
T* UnwrapAs(Napi::Env env, Napi::Value v, Napi::FunctionReference AddonData::*ctor, const char* what, const char* op) {
  AddonData* data = env.GetInstanceData<AddonData>();
  if (!v.IsObject() || !v.As<Napi::Object>().InstanceOf((data->*ctor).Value()))
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, op, std::string("expected a ") + what);
  return Napi::ObjectWrap<T>::Unwrap(v.As<Napi::Object>());
}

}  // namespace rblk
