// The fast path's side of QoS (docs/architecture.md "QoS buckets"): taking
// the buckets JS publishes with a LUN's record. Apart from fast-path.cc,
// which is long enough; the charge itself is in TryReceive (qos-bucket.h).
#include <cerrno>

#include "errors.h"
#include "fast-path.h"
#include "qos-bucket.h"

namespace rblk {

// record.qos: an array of BigInt64Arrays, each one QoS bucket's state
// (qos-bucket.h); absent or empty, the LUN is not limited here.
void FastPath::SetQos(Napi::Env env, Lun& lun, Napi::Value qos) {
  std::vector<int64_t*> states;
  std::vector<Napi::ObjectReference> refs;
  if (!qos.IsUndefined() && !qos.IsNull()) {
    if (!qos.IsArray()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FastPath.setLun", "qos must be an array of BigInt64Array");
    Napi::Array a = qos.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); i++) {
      Napi::Value v = a.Get(i);
      napi_typedarray_type type;
      size_t length = 0;
      void* data = nullptr;
      if (!v.IsTypedArray() || napi_get_typedarray_info(env, v, &type, &length, &data, nullptr, nullptr) != napi_ok ||
          type != napi_bigint64_array || length < kQosStateWords || data == nullptr)
        throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FastPath.setLun", "each qos entry must be a BigInt64Array of a QoS bucket's state");
      states.push_back(static_cast<int64_t*>(data));
      refs.push_back(Napi::Persistent(v.As<Napi::Object>()));
    }
  }
  lun.qos = std::move(states);
  lun.qos_refs = std::move(refs);
}

}  // namespace rblk
