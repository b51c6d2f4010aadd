#include "listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_errno.h>

#include "addon-data.h"
#include "domain.h"
#include "errors.h"

namespace rblk {

namespace {
// Long enough for a request that is one segment, short enough that a peer
// that stops half-way costs the daemon no more than this (stale-accepts.h).
constexpr unsigned kRequestReadTimeoutMs = 20;
}  // namespace

Napi::Function Listener::Init(Napi::Env env) {
  return DefineClass(env, "Listener",
                     {InstanceAccessor<&Listener::Port>("port"), InstanceAccessor<&Listener::Address>("address"),
                      InstanceMethod<&Listener::Reject>("reject"), InstanceMethod<&Listener::Close>("close"),
                      InstanceMethod<&Listener::ReapStale>("reapStale")});
}

// new Listener(domain, node, service, onEvent)
Listener::Listener(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Listener>(info), env_(info.Env()) {
  Napi::Env env = info.Env();
  domain_ = UnwrapAs<Domain>(env, info[0], &AddonData::domain, "Domain", "fi_listen");
  domain_->CheckOpen(env, "fi_listen");
  std::string node = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
  std::string service = info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : "0";
  if (!info[3].IsFunction()) throw Napi::TypeError::New(env, "Listener: onEvent must be a function");

  int rc = domain_->GetInfo(node.empty() ? nullptr : node.c_str(), service.c_str(), FI_SOURCE, &info_);
  if (rc != 0) {
    info_ = nullptr;
    throw MakeError(env, -rc, "fi_getinfo(" + node + ":" + service + ")");
  }
  rc = fi_passive_ep(domain_->fabric(), info_, &pep_, nullptr);
  if (rc != 0) {
    pep_ = nullptr;
    Teardown();
    throw MakeError(env, -rc, "fi_passive_ep");
  }
  uv_loop_t* loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  const char* op = "";
  rc = eq_.Open(domain_->fabric(), loop, [this]() { OnEvents(); }, &op);
  if (rc == 0) {
    op = "fi_pep_bind";
    rc = fi_pep_bind(pep_, &eq_.eq()->fid, 0);
  }
  if (rc == 0) {
    op = "fi_listen";
    rc = fi_listen(pep_);
  }
  if (rc != 0) {
    Teardown();
    throw MakeError(env, -rc, op);
  }
  sockaddr_storage ss{};
  size_t len = sizeof(ss);
  rc = fi_getname(&pep_->fid, &ss, &len);
  if (rc != 0) {
    Teardown();
    throw MakeError(env, -rc, "fi_getname");
  }
  char text[INET6_ADDRSTRLEN] = "";
  if (ss.ss_family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    port_ = ntohs(sin->sin_port);
    inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text));
  } else if (ss.ss_family == AF_INET6) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    port_ = ntohs(sin6->sin6_port);
    inet_ntop(AF_INET6, &sin6->sin6_addr, text, sizeof(text));
  }
  address_ = text;
  local_ = ss;
  // A half-sent connection request must not block the thread that reads the
  // event queue (stale-accepts.h): the accepted sockets inherit this bound.
  BoundRequestReads(local_, kRequestReadTimeoutMs);
  domain_ref_ = Napi::Persistent(info[0].As<Napi::Object>());
  on_event_ = Napi::Persistent(info[3].As<Napi::Function>());
  async_ = new Napi::AsyncContext(env, "rblk:Listener");
  // Stay alive while listening: the event queue calls back into this object.
  Ref();
}

Listener::~Listener() { Teardown(); }

// Unanswered requests are rejected, then the passive endpoint is closed
// before its event queue: while bound, the pep holds a reference on the EQ
// and fi_close(eq) would fail with -FI_EBUSY and leave its fds open.
void Listener::Teardown() {
  eq_.StopPolling();
  for (auto& [id, req] : requests_) {
    if (pep_ != nullptr) fi_reject(pep_, req->handle, nullptr, 0);
    fi_freeinfo(req);
  }
  requests_.clear();
  if (pep_ != nullptr) {
    fi_close(&pep_->fid);
    pep_ = nullptr;
  }
  eq_.Close();
  if (info_ != nullptr) {
    fi_freeinfo(info_);
    info_ = nullptr;
  }
  delete async_;
  async_ = nullptr;
  on_event_.Reset();
  domain_ref_.Reset();
}

fi_info* Listener::PeekRequest(uint32_t id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second;
}

fi_info* Listener::TakeRequest(uint32_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return nullptr;
  fi_info* req = it->second;
  requests_.erase(it);
  return req;
}

void Listener::OnEvents() {
  Napi::Env env(env_);
  Napi::HandleScope scope(env);
  for (;;) {
    while (pep_ != nullptr) {
      Napi::Object ev;
      fi_info* req = nullptr;
      if (eq_.Read(env, &ev, &req) == 0) break;
      if (req != nullptr) {
        uint32_t id = next_request_++;
        requests_[id] = req;
        ev.Set("requestId", Napi::Number::New(env, id));
      }
      try {
        on_event_.MakeCallback(Value(), {ev}, *async_);
      } catch (const Napi::Error& e) {
        napi_fatal_exception(env, e.Value());
        return;
      }
    }
    if (pep_ == nullptr || eq_.TryWait(domain_->fabric())) return;
  }
}

Napi::Value Listener::Port(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), port_); }
Napi::Value Listener::Address(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), address_); }

// reject(requestId, privateData|null)
Napi::Value Listener::Reject(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (pep_ == nullptr) throw MakeUsageError(env, "ERR_CLOSED", EBADF, "fi_reject", "the listener is closed");
  fi_info* req = TakeRequest(info[0].ToNumber().Uint32Value());
  if (req == nullptr) throw MakeUsageError(env, "ERR_UNKNOWN_REQUEST", EINVAL, "fi_reject", "no such pending connection request");
  const void* pd = nullptr;
  size_t len = 0;
  if (info[1].IsBuffer()) {
    pd = info[1].As<Napi::Buffer<uint8_t>>().Data();
    len = info[1].As<Napi::Buffer<uint8_t>>().Length();
  }
  int rc = fi_reject(pep_, req->handle, pd, len);
  fi_freeinfo(req);
  CheckFabric(env, rc, "fi_reject");
  return env.Undefined();
}

// reapStale(idleMs) → how many accepted sockets were shut down (stale-accepts.h).
Napi::Value Listener::ReapStale(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (pep_ == nullptr) throw MakeUsageError(env, "ERR_CLOSED", EBADF, "Listener.reapStale", "the listener is closed");
  if (!info[0].IsNumber()) throw Napi::TypeError::New(env, "Listener.reapStale: idleMs must be a number");
  double idle = info[0].As<Napi::Number>().DoubleValue();
  if (!(idle >= 1)) throw Napi::RangeError::New(env, "Listener.reapStale: idleMs must be at least 1");
  if (!stale_) stale_ = std::make_unique<StaleAccepts>(local_);
  return Napi::Number::New(env, stale_->Reap(static_cast<uint64_t>(idle)));
}

Napi::Value Listener::Close(const Napi::CallbackInfo& info) {
  if (pep_ == nullptr) throw MakeUsageError(info.Env(), "ERR_CLOSED", EBADF, "Listener.close", "already closed");
  Teardown();
  Unref();
  return info.Env().Undefined();
}

}  // namespace rblk
