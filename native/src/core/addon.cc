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
#include "heap-trim.h"
#include "domain.h"
#include "endpoint.h"
#include "reactor.h"
#include "errors.h"
#include "fast-capsule.h"
#include "fast-cdb.h"
#include "fast-path.h"
#include "file-ops.h"
#include "initiator-queue.h"
#include "listener.h"
#include "memory-region.h"

namespace rblk {

namespace {

Napi::Value Providers(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::set<std::string> names;
  // providers('rdm'): those offering FI_EP_RDM instead (shm, tcp;ofi_rxm, ...).
  const bool rdm = info.Length() > 0 && info[0].IsString() && info[0].As<Napi::String>().Utf8Value() == "rdm";
  for (bool atomics : {false}) {
    fi_info* hints = MakeHints("", atomics, false, false, false, rdm);
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

// decodeFastCommand(capsule, maxCapsule, maxTransfer, maxImmediate): what the
// fast path's decoders make of a capsule, or null when it is not theirs. For
// tests only (test/native/fast-decode.test.ts compares it with protocol/wire).
Napi::Value DecodeFastCommand(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsBuffer()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "decodeFastCommand", "capsule must be a Buffer");
  auto buf = info[0].As<Napi::Buffer<uint8_t>>();
  FastLimits limits;
  limits.max_capsule = info[1].ToNumber().Uint32Value();
  limits.max_transfer = info[2].ToNumber().Uint32Value();
  limits.max_immediate = info[3].ToNumber().Uint32Value();
  FastCapsule c;
  if (!DecodeFastCapsule(buf.Data(), buf.Length(), limits, &c)) return env.Null();
  Napi::Object o = Napi::Object::New(env);
  o.Set("tag", Napi::BigInt::New(env, c.tag));
  o.Set("lun", Napi::Number::New(env, c.lun));
  o.Set("write", Napi::Boolean::New(env, c.write));
  o.Set("immediate", Napi::Boolean::New(env, c.immediate));
  o.Set("address", Napi::BigInt::New(env, c.address));
  o.Set("key", Napi::BigInt::New(env, c.key));
  o.Set("dataLength", Napi::Number::New(env, c.data_length));
  FastCdb d;
  if (DecodeFastCdb(c.cdb, &d)) {
    Napi::Object r = Napi::Object::New(env);
    r.Set("write", Napi::Boolean::New(env, d.write));
    r.Set("fua", Napi::Boolean::New(env, d.fua));
    r.Set("lba", Napi::BigInt::New(env, d.lba));
    r.Set("blocks", Napi::Number::New(env, d.blocks));
    o.Set("cdb", r);
  } else {
    o.Set("cdb", env.Null());
  }
  return o;
}

// scanTrain(message): how the fast path frames a received message of a
// version-5 connection (docs/protocol.md §5.1): the lengths of its capsules,
// or null for a malformed train. For tests only (test/native/fast-decode.test.ts
// compares it with protocol/wire/train.ts splitTrain).
Napi::Value ScanTrainForTest(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsBuffer()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "scanTrain", "message must be a Buffer");
  auto buf = info[0].As<Napi::Buffer<uint8_t>>();
  TrainShape shape = ScanTrain(buf.Data(), buf.Length());
  if (shape == TrainShape::kMalformed) return env.Null();
  Napi::Array out = Napi::Array::New(env);
  if (shape == TrainShape::kSingle) {
    out.Set(0u, Napi::Number::New(env, static_cast<double>(buf.Length())));
    return out;
  }
  // A well-formed train: its length fields walk it to its end, as TryReceive walks it.
  uint32_t i = 0;
  for (size_t off = 0; off < buf.Length(); off += CapsuleLength(buf.Data() + off))
    out.Set(i++, Napi::Number::New(env, CapsuleLength(buf.Data() + off)));
  return out;
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
  Napi::Function pages = Pages::Init(env);
  data->pages = Napi::Persistent(pages);
  data->listener = Napi::Persistent(listener);
  data->endpoint = Napi::Persistent(endpoint);
  env.SetInstanceData(data);
  exports.Set("Domain", domain);
  exports.Set("MemoryRegion", mr);
  exports.Set("Pages", pages);
  exports.Set("Listener", listener);
  exports.Set("Endpoint", endpoint);
  exports.Set("FastPath", FastPath::Init(env));
  Napi::Function reactors = Reactors::Init(env);
  data->reactors = Napi::Persistent(reactors);
  exports.Set("Reactors", reactors);
  exports.Set("InitiatorQueue", InitiatorQueue::Init(env));
  exports.Set("decodeFastCommand", Napi::Function::New(env, DecodeFastCommand, "decodeFastCommand"));
  exports.Set("scanTrain", Napi::Function::New(env, ScanTrainForTest, "scanTrain"));
  exports.Set("constants", Constants(env));
  exports.Set("providers", Napi::Function::New(env, Providers, "providers"));
  exports.Set("libfabricVersion", Napi::Function::New(env, LibfabricVersion, "libfabricVersion"));
  exports.Set("errorName", Napi::Function::New(env, ErrorName, "errorName"));
  exports.Set("errorMessage", Napi::Function::New(env, ErrorMessage, "errorMessage"));
  exports.Set("trimHeap", Napi::Function::New(env, TrimHeap, "trimHeap"));
  InitFileOps(env, exports);
  return exports;
}

}  // namespace rblk

static Napi::Object Init(Napi::Env env, Napi::Object exports) { return rblk::InitAddon(env, exports); }

NODE_API_MODULE(rblk_native, Init)
