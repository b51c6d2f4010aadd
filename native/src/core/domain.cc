#include "domain.h"

#include <rdma/fi_errno.h>

#include <cstring>
#include <string>

#include "errors.h"

namespace rblk {

namespace {
constexpr uint32_t kApiVersion = FI_VERSION(1, 17);
// FI_MR_BASIC is the mr_mode of library versions 1.4 and earlier (fi_domain(3)).
constexpr uint32_t kBasicApiVersion = FI_VERSION(1, 4);
constexpr uint64_t kBasicBits = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
}  // namespace

uint64_t NormalizeMrMode(int mr_mode) {
  if (mr_mode == FI_MR_BASIC) return kBasicBits;
  if (mr_mode == FI_MR_SCALABLE) return 0;
  return static_cast<uint64_t>(mr_mode);
}

fi_info* MakeHints(const std::string& provider, bool atomics, bool saw_order, bool basic_mr, bool thread_safe, bool rdm) {
  fi_info* hints = fi_allocinfo();
  if (hints == nullptr) return nullptr;
  hints->ep_attr->type = rdm ? FI_EP_RDM : FI_EP_MSG;
  hints->caps = FI_MSG | FI_RMA | (atomics ? FI_ATOMIC : 0) | (rdm ? FI_TAGGED : 0);
  hints->mode = 0;
  // FI_MR_BASIC "may not be used in conjunction with other mr_mode bits" (fi_domain(3)).
  hints->domain_attr->mr_mode =
      basic_mr ? FI_MR_BASIC : FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  // Every call is made from the JS thread, unless reactor threads drive some
  // endpoints (reactor.h): then calls on the domain's objects come from
  // several threads, each endpoint's serialized by its own lock.
  hints->domain_attr->threading = thread_safe ? FI_THREAD_SAFE : FI_THREAD_DOMAIN;
  if (saw_order) hints->tx_attr->msg_order = FI_ORDER_SAW;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  return hints;
}

Napi::Function Domain::Init(Napi::Env env) {
  return DefineClass(env, "Domain",
                     {InstanceAccessor<&Domain::Info>("info"), InstanceMethod<&Domain::Close>("close")});
}

// new Domain(provider, node, service, source, mrMode: 'default' | 'basic', threadSafe?, endpointType?: 'msg' | 'rdm')
Domain::Domain(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Domain>(info) {
  Napi::Env env = info.Env();
  std::string provider = info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "";
  std::string node = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
  std::string service = info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : "";
  bool source = info[3].IsBoolean() && info[3].As<Napi::Boolean>().Value();
  MrModeRequest mr_request = MrModeRequest::kDefault;
  if (info.Length() > 4 && !info[4].IsUndefined()) {
    std::string m = info[4].IsString() ? info[4].As<Napi::String>().Utf8Value() : "";
    if (m == "basic")
      mr_request = MrModeRequest::kBasic;
    else if (m != "default")
      throw MakeUsageError(env, "ERR_INVALID_ARG_VALUE", EINVAL, "fi_getinfo",
                           "mrMode must be 'default' or 'basic'");
  }
  const bool basic = mr_request == MrModeRequest::kBasic;
  const bool thread_safe = info.Length() > 5 && info[5].ToBoolean().Value();
  if (info.Length() > 6 && !info[6].IsUndefined()) {
    std::string t = info[6].IsString() ? info[6].As<Napi::String>().Utf8Value() : "";
    if (t == "rdm")
      rdm_ = true;
    else if (t != "msg")
      throw MakeUsageError(env, "ERR_INVALID_ARG_VALUE", EINVAL, "fi_getinfo", "endpointType must be 'msg' or 'rdm'");
  }
  // An RDM domain is not tied to one peer's address: the node names nothing
  // to shm, and rxm resolves each peer when an endpoint is opened.
  if (rdm_) node.clear();
  api_version_ = basic ? kBasicApiVersion : kApiVersion;

  // Ask for the most first: atomics and send-after-write ordering, then less.
  int rc = -FI_ENODATA;
  const bool tries[4][2] = {{true, true}, {false, true}, {true, false}, {false, false}};
  for (const auto& t : tries) {
    fi_info* hints = MakeHints(provider, t[0], t[1], basic, thread_safe, rdm_);
    if (hints == nullptr) throw MakeError(env, FI_ENOMEM, "fi_allocinfo");
    rc = fi_getinfo(api_version_, node.empty() ? nullptr : node.c_str(), service.empty() ? nullptr : service.c_str(),
                    source ? FI_SOURCE : 0, hints, &info_);
    if (rc == 0) {
      hints_ = hints;
      break;
    }
    fi_freeinfo(hints);
  }
  if (rc != 0) {
    Napi::Error e = MakeError(env, -rc, "fi_getinfo");
    e.Set("message", Napi::String::New(env, "fi_getinfo: no libfabric provider '" + provider +
                                                "' offers " + (rdm_ ? "FI_EP_RDM" : "FI_EP_MSG") + " with FI_RMA" +
                                                (basic ? " and FI_MR_BASIC" : "") + " here (" +
                                                FabricErrorName(-rc) + ")"));
    throw e;
  }
  mr_mode_ = NormalizeMrMode(info_->domain_attr->mr_mode);
  // The basic mode exists to run the verbs rules here: a provider that quietly
  // granted less would make it test nothing, so that is an error, not a fallback.
  if (basic && (mr_mode_ & kBasicBits) != kBasicBits) {
    int granted = info_->domain_attr->mr_mode;
    CloseFabric();
    throw MakeUsageError(env, "FI_ENODATA", FI_ENODATA, "fi_getinfo",
                         "the '" + provider + "' provider was asked for FI_MR_BASIC but granted mr_mode " +
                             std::to_string(granted));
  }
  rc = fi_fabric(info_->fabric_attr, &fabric_, nullptr);
  if (rc != 0) {
    CloseFabric();
    throw MakeError(env, -rc, "fi_fabric");
  }
  rc = fi_domain(fabric_, info_, &domain_, nullptr);
  if (rc != 0) {
    CloseFabric();
    throw MakeError(env, -rc, "fi_domain");
  }
}

Domain::~Domain() { CloseFabric(); }

int Domain::GetInfo(const char* node, const char* service, uint64_t flags, fi_info** out) const {
  return fi_getinfo(api_version_, node, service, flags, hints_, out);
}

void Domain::CheckOpen(Napi::Env env, const char* op) const {
  if (domain_ == nullptr) throw MakeUsageError(env, "ERR_CLOSED", EBADF, op, "the domain is closed");
}

int Domain::CloseFabric() {
  int rc = 0;
  // Reverse order of opening.
  if (domain_ != nullptr) {
    rc = fi_close(&domain_->fid);
    if (rc != 0) return rc;  // FI_EBUSY: something is still open on it.
    domain_ = nullptr;
  }
  if (fabric_ != nullptr) {
    fi_close(&fabric_->fid);
    fabric_ = nullptr;
  }
  if (info_ != nullptr) {
    fi_freeinfo(info_);
    info_ = nullptr;
  }
  if (hints_ != nullptr) {
    fi_freeinfo(hints_);
    hints_ = nullptr;
  }
  return 0;
}

Napi::Value Domain::Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info_obj_.IsEmpty()) return info_obj_.Value();
  CheckOpen(env, "Domain.info");
  Napi::Object o = Napi::Object::New(env);
  o.Set("provider", info_->fabric_attr->prov_name);
  o.Set("fabric", info_->fabric_attr->name);
  o.Set("domain", info_->domain_attr->name);
  o.Set("mrMode", Napi::Number::New(env, static_cast<double>(mr_mode_)));
  o.Set("apiVersion", Napi::String::New(env, std::to_string(FI_MAJOR(api_version_)) + "." +
                                                 std::to_string(FI_MINOR(api_version_))));
  o.Set("msgOrder", Napi::Number::New(env, static_cast<double>(info_->tx_attr->msg_order)));
  o.Set("atomics", Napi::Boolean::New(env, has_atomics()));
  o.Set("maxMsgSize", Napi::Number::New(env, static_cast<double>(info_->ep_attr->max_msg_size)));
  o.Set("injectSize", Napi::Number::New(env, static_cast<double>(info_->tx_attr->inject_size)));
  o.Set("iovLimit", Napi::Number::New(env, static_cast<double>(info_->tx_attr->iov_limit)));
  o.Set("rmaIovLimit", Napi::Number::New(env, static_cast<double>(info_->tx_attr->rma_iov_limit)));
  o.Set("txSize", Napi::Number::New(env, static_cast<double>(info_->tx_attr->size)));
  o.Set("rxSize", Napi::Number::New(env, static_cast<double>(info_->rx_attr->size)));
  o.Set("cqDataSize", Napi::Number::New(env, static_cast<double>(cq_data_size())));
  o.Set("rxCqData", Napi::Boolean::New(env, (info_->rx_attr->mode & FI_RX_CQ_DATA) != 0));
  o.Set("mrKeySize", Napi::Number::New(env, static_cast<double>(info_->domain_attr->mr_key_size)));
  // FI_OPT_CM_DATA_SIZE needs an endpoint; the passive endpoint reports it too.
  // The spec floor for MSG endpoints (fi_cm(3)) is 56 bytes, which every
  // provider here meets, so that is what rblk relies on.
  o.Set("cmDataSize", Napi::Number::New(env, 56));
  o.Set("endpointType", Napi::String::New(env, rdm_ ? "rdm" : "msg"));
  info_obj_ = Napi::Persistent(o);
  return o;
}

Napi::Value Domain::Close(const Napi::CallbackInfo& info) {
  int rc = CloseFabric();
  if (rc != 0) throw MakeError(info.Env(), -rc, "fi_close(domain)");
  info_obj_.Reset();
  return info.Env().Undefined();
}

}  // namespace rblk
