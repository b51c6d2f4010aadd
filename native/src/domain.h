// One libfabric fabric + domain for a provider (fi_getinfo → fi_fabric →
// fi_domain). Listeners, endpoints and memory regions are opened on it.
#pragma once
#include <napi.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstdint>
#include <cstring>

namespace rblk {

class Domain : public Napi::ObjectWrap<Domain> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Domain(const Napi::CallbackInfo& info);
  ~Domain() override;

  // fi_getinfo with the same hints this domain was opened with.
  int GetInfo(const char* node, const char* service, uint64_t flags, fi_info** out) const;
  void CheckOpen(Napi::Env env, const char* op) const;

  fid_fabric* fabric() const { return fabric_; }
  fid_domain* domain() const { return domain_; }
  const fi_info* info() const { return info_; }
  uint64_t mr_mode() const { return static_cast<uint64_t>(info_->domain_attr->mr_mode); }
  bool has_atomics() const { return (info_->caps & FI_ATOMIC) != 0; }
  // Whether fi_shutdown may be called before fi_close. The sockets provider
  // (libfabric 1.17, sock_ep_cm_shutdown) closes the connection's socket
  // while its CM thread still watches it and closes that fd number again
  // later: by then it may be another connection's fd, which then fails
  // (FI_ECONNREFUSED on the next connect, EBADF in the progress thread).
  bool shutdown_is_safe() const { return std::strcmp(info_->fabric_attr->prov_name, "sockets") != 0; }
  uint64_t NextKey() { return next_key_++; }

 private:
  Napi::Value Info(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  int CloseFabric();

  fi_info* hints_ = nullptr;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  uint64_t next_key_ = 1;
  Napi::ObjectReference info_obj_;
};

// Hints rblk asks every provider for: connection-oriented MSG endpoints with
// RMA (and atomics, ordering when the provider has them), every mr_mode bit we
// honour, and no FI_CONTEXT mode (contexts are plain integers).
fi_info* MakeHints(const std::string& provider, bool atomics, bool saw_order);

}  // namespace rblk
