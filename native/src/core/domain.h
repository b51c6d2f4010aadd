// One libfabric fabric + domain for a provider (fi_getinfo → fi_fabric →
// fi_domain). Listeners, endpoints and memory regions are opened on it.
#pragma once
#include <napi.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>

namespace rblk {

class MemoryRegion;

// A domain's regions open to remote access, by key (Domain::remote_regions).
struct RemoteRegions {
  std::unordered_map<uint64_t, MemoryRegion*> by_key;
};

class Domain : public Napi::ObjectWrap<Domain> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Domain(const Napi::CallbackInfo& info);
  ~Domain() override;

  // fi_getinfo with the same hints (and API version) this domain was opened with.
  int GetInfo(const char* node, const char* service, uint64_t flags, fi_info** out) const;
  void CheckOpen(Napi::Env env, const char* op) const;

  fid_fabric* fabric() const { return fabric_; }
  fid_domain* domain() const { return domain_; }
  const fi_info* info() const { return info_; }
  // The granted mr_mode as FI_MR_* bits: the legacy FI_MR_BASIC and
  // FI_MR_SCALABLE values are translated (see NormalizeMrMode).
  uint64_t mr_mode() const { return mr_mode_; }
  bool has_atomics() const { return (info_->caps & FI_ATOMIC) != 0; }
  // Bytes of remote CQ data a write may carry here; 0 under the rxm utility
  // provider. libfabric's rxm (1.17, and its current source too) reads a
  // cancelled completion of a peer's write with data, which the tcp core
  // reports with no operation context, as one of its own buffers and crashes
  // the process when an endpoint closes while such a write is arriving
  // (docs/transport.md "Remote CQ data"). Without it, reads are answered by
  // a response capsule, as in protocol version 1.
  size_t cq_data_size() const {
    return std::strstr(info_->fabric_attr->prov_name, "ofi_rxm") != nullptr ? 0 : info_->domain_attr->cq_data_size;
  }
  // Whether fi_shutdown may be called before fi_close. The sockets provider
  // (libfabric 1.17, sock_ep_cm_shutdown) closes the connection's socket
  // while its CM thread still watches it and closes that fd number again
  // later: by then it may be another connection's fd, which then fails
  // (FI_ECONNREFUSED on the next connect, EBADF in the progress thread).
  bool shutdown_is_safe() const { return std::strcmp(info_->fabric_attr->prov_name, "sockets") != 0; }
  uint64_t NextKey() { return next_key_++; }
  // FI_EP_RDM: reliable datagrams through an address vector, no connections
  // (docs/transport.md "RDM endpoints").
  bool rdm() const { return rdm_; }
  // The shm provider: endpoints are named, not bound to a socket address.
  bool shm() const { return std::strcmp(info_->fabric_attr->prov_name, "shm") == 0; }
  // The live regions open to remote access, by key: the initiator's queue
  // finds a write's source there to send it as immediate data
  // (initiator-queue.h). Shared with each listed region, which takes itself
  // out when it deregisters, whichever of the two goes first. JS thread only,
  // as registration is.
  const std::shared_ptr<RemoteRegions>& remote_regions() const { return remote_; }

 private:
  Napi::Value Info(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  int CloseFabric();

  uint32_t api_version_ = 0;
  uint64_t mr_mode_ = 0;
  bool rdm_ = false;
  fi_info* hints_ = nullptr;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  // Keys rblk requests (used when the provider lacks FI_MR_PROV_KEY). They
  // start away from 1, where tcp's and sockets' own keys start under
  // FI_MR_BASIC, so code that confused the two cannot pass that test mode.
  uint64_t next_key_ = 0x1000;
  std::shared_ptr<RemoteRegions> remote_ = std::make_shared<RemoteRegions>();
  Napi::ObjectReference info_obj_;
};

// Hints rblk asks every provider for: connection-oriented MSG endpoints with
// RMA (and atomics, ordering when the provider has them), every mr_mode bit we
// honour, and no FI_CONTEXT mode (contexts are plain integers).
// basic_mr asks for the legacy FI_MR_BASIC instead (see MrModeRequest).
// rdm asks for FI_EP_RDM with tagged messages (the connection handshake's, docs/protocol.md "RDM endpoints").
fi_info* MakeHints(const std::string& provider, bool atomics, bool saw_order, bool basic_mr = false, bool thread_safe = false,
                   bool rdm = false);

// What mr_mode a Domain asks for. kDefault: every bit rblk honours, at the
// current API (tcp and sockets grant none of them). kBasic: FI_MR_BASIC at API
// 1.4, which tcp and sockets grant: virtual addresses and provider keys, the
// rules the verbs provider imposes (docs/transport.md "Memory-registration modes").
enum class MrModeRequest { kDefault, kBasic };

// fi_domain(3): FI_MR_BASIC "is equivalent to the FI_MR_VIRT_ADDR,
// FI_MR_ALLOCATED, and FI_MR_PROV_KEY flags"; FI_MR_SCALABLE is offset
// addressing with keys chosen by the application, that is, none of the bits.
uint64_t NormalizeMrMode(int mr_mode);

}  // namespace rblk
