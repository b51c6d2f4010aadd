// Entry of rblk_native.node: registers the classes (one per libfabric object)
// and the free functions. io_uring, FUSE and sd_notify are addons of their own
// (uring-addon.cc, fuse-addon.cc, systemd-addon.cc), each optional.
// native/binding.ts is the only file that loads any of them.
#include <napi.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <set>

#include "addon-data.h"
#include "child-fds.h"
#include "domain.h"
#include "endpoint.h"
#include "errors.h"
#include "file-ops.h"
#include "listener.h"
#include "memory-region.h"

namespace rblk {

namespace {

Napi::Value Providers(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::set<std::string> names;
  for (bool atomics : {false}) {
    fi_info* hints = MakeHints("", atomics, false);
    fi_info* list = nullptr;
    if (fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &list) == 0) {
      for (fi_info* p = list; p != nullptr; p = p->next) names.insert(p->fabric_attr->prov_name);
      fi_freeinfo(list);
    }
    fi_freeinfo(hints);
  }
  Napi::Array out = Napi::Array::New(env, names.size());
  uint32_t i = 0;
  for (const auto& n : names) out.Set(i++, n);
  return out;
}

Napi::Value LibfabricVersion(const Napi::CallbackInfo& info) {
  uint32_t v = fi_version();
  return Napi::String::New(info.Env(), std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v)));
}

Napi::Value ErrorName(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), FabricErrorName(info[0].ToNumber().Int32Value()));
}

Napi::Value ErrorMessage(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), FabricErrorMessage(info[0].ToNumber().Int32Value()));
}

Napi::Object Constants(Napi::Env env) {
  Napi::Object c = Napi::Object::New(env);
  c.Set("FI_MR_LOCAL", Napi::Number::New(env, FI_MR_LOCAL));
  c.Set("FI_MR_VIRT_ADDR", Napi::Number::New(env, FI_MR_VIRT_ADDR));
  c.Set("FI_MR_ALLOCATED", Napi::Number::New(env, FI_MR_ALLOCATED));
  c.Set("FI_MR_PROV_KEY", Napi::Number::New(env, FI_MR_PROV_KEY));
  c.Set("FI_MR_ENDPOINT", Napi::Number::New(env, FI_MR_ENDPOINT));
  c.Set("FI_ORDER_SAW", Napi::Number::New(env, static_cast<double>(FI_ORDER_SAW)));
  c.Set("FI_ORDER_RAW", Napi::Number::New(env, static_cast<double>(FI_ORDER_RAW)));
  c.Set("FI_ORDER_WAW", Napi::Number::New(env, static_cast<double>(FI_ORDER_WAW)));
  c.Set("FI_ORDER_SAS", Napi::Number::New(env, static_cast<double>(FI_ORDER_SAS)));
  return c;
}

}  // namespace

Napi::Object InitAddon(Napi::Env env, Napi::Object exports) {
  ProtectChildFds();
  auto* data = new AddonData;
  Napi::Function domain = Domain::Init(env);
  Napi::Function mr = MemoryRegion::Init(env);
  Napi::Function listener = Listener::Init(env);
  Napi::Function endpoint = Endpoint::Init(env);
  data->domain = Napi::Persistent(domain);
  data->memory_region = Napi::Persistent(mr);
  data->listener = Napi::Persistent(listener);
  data->endpoint = Napi::Persistent(endpoint);
  env.SetInstanceData(data);
  exports.Set("Domain", domain);
  exports.Set("MemoryRegion", mr);
  exports.Set("Listener", listener);
  exports.Set("Endpoint", endpoint);
  exports.Set("constants", Constants(env));
  exports.Set("providers", Napi::Function::New(env, Providers, "providers"));
  exports.Set("libfabricVersion", Napi::Function::New(env, LibfabricVersion, "libfabricVersion"));
  exports.Set("errorName", Napi::Function::New(env, ErrorName, "errorName"));
  exports.Set("errorMessage", Napi::Function::New(env, ErrorMessage, "errorMessage"));
  InitFileOps(env, exports);
  return exports;
}

}  // namespace rblk

static Napi::Object Init(Napi::Env env, Napi::Object exports) { return rblk::InitAddon(env, exports); }

NODE_API_MODULE(rblk_native, Init)
