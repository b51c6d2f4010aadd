// A passive endpoint (fi_passive_ep + fi_listen) with its own event queue.
// Connection requests reach JS with their private data and an id; the
// fi_info behind the id is handed to an Endpoint on accept, or rejected.
#pragma once
#include <napi.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "event-queue.h"
#include "stale-accepts.h"

namespace rblk {

class Domain;

class Listener : public Napi::ObjectWrap<Listener> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Listener(const Napi::CallbackInfo& info);
  ~Listener() override;

  // The fi_info of a pending connection request, still owned here (nullptr if unknown).
  fi_info* PeekRequest(uint32_t id) const;
  // Hands over the fi_info of a pending connection request (nullptr if unknown).
  fi_info* TakeRequest(uint32_t id);

 private:
  Napi::Value Port(const Napi::CallbackInfo& info);
  Napi::Value Address(const Napi::CallbackInfo& info);
  Napi::Value Reject(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value ReapStale(const Napi::CallbackInfo& info);
  void OnEvents();
  void Teardown();

  Domain* domain_ = nullptr;
  fi_info* info_ = nullptr;
  fid_pep* pep_ = nullptr;
  EventQueue eq_;
  std::unordered_map<uint32_t, fi_info*> requests_;
  uint32_t next_request_ = 1;
  int port_ = 0;
  std::string address_;
  sockaddr_storage local_{};
  std::unique_ptr<StaleAccepts> stale_;
  napi_env env_ = nullptr;
  Napi::ObjectReference domain_ref_;
  Napi::FunctionReference on_event_;
  Napi::AsyncContext* async_ = nullptr;
};

}  // namespace rblk
