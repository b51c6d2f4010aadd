#include "event-queue.h"

#include <rdma/fi_errno.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <string>
#include <vector>

#include "errors.h"

namespace rblk {

namespace {
// fi_cm(3): MSG endpoints carry at least 56 bytes of private data; leave room for more.
constexpr size_t kMaxCmData = 256;

// "address:port" ("[address]:port" for IPv6) of a connection request's
// source, from the fi_info the provider filled in (fi_cm(3): dest_addr of an
// FI_CONNREQ's info is the peer). Empty when the provider gives no socket
// address (verbs may give FI_SOCKADDR_IB): the target logs what it knows.
std::string PeerText(const fi_info* info) {
  if (info == nullptr || info->dest_addr == nullptr) return "";
  const auto* sa = static_cast<const sockaddr*>(info->dest_addr);
  char host[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET && info->dest_addrlen >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    if (inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host)) == nullptr) return "";
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6 && info->dest_addrlen >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host)) == nullptr) return "";
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "";
}
}  // namespace

int EventQueue::Open(fid_fabric* fabric, uv_loop_t* loop, std::function<void()> on_readable, const char** op) {
  fi_eq_attr attr{};
  attr.size = 64;
  attr.wait_obj = FI_WAIT_FD;
  int rc = fi_eq_open(fabric, &attr, &eq_, nullptr);
  if (rc != 0) {
    eq_ = nullptr;
    *op = "fi_eq_open";
    return rc;
  }
  int fd = -1;
  rc = fi_control(&eq_->fid, FI_GETWAIT, &fd);
  if (rc != 0) {
    *op = "fi_control(FI_GETWAIT)";
    return rc;
  }
  rc = poller_.Start(loop, fd, std::move(on_readable));
  if (rc != 0) {
    *op = "uv_poll_start";
    return -FI_EIO;
  }
  return 0;
}

int EventQueue::Read(Napi::Env env, Napi::Object* out, fi_info** connreq) {
  *connreq = nullptr;
  if (eq_ == nullptr) return 0;
  alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + kMaxCmData];
  uint32_t event = 0;
  ssize_t n = fi_eq_read(eq_, &event, buf, sizeof(buf), 0);
  if (n == -FI_EAGAIN) return 0;
  Napi::Object o = Napi::Object::New(env);
  if (n == -FI_EAVAIL) {
    fi_eq_err_entry err{};
    ssize_t m = fi_eq_readerr(eq_, &err, 0);
    int code = m < 0 ? static_cast<int>(-m) : err.err;
    o.Set("type", "error");
    o.Set("errno", Napi::Number::New(env, code));
    o.Set("code", FabricErrorName(code));
    o.Set("message", FabricErrorMessage(code));
    // A reject carries the peer's private data here (fi_cm(3), fi_reject).
    if (m >= 0 && err.err_data != nullptr && err.err_data_size > 0)
      o.Set("privateData",
            Napi::Buffer<uint8_t>::Copy(env, static_cast<const uint8_t*>(err.err_data), err.err_data_size));
    *out = o;
    return 1;
  }
  if (n < 0) {
    int code = static_cast<int>(-n);
    o.Set("type", "error");
    o.Set("errno", Napi::Number::New(env, code));
    o.Set("code", FabricErrorName(code));
    o.Set("message", FabricErrorMessage(code));
    *out = o;
    return 1;
  }
  auto* entry = reinterpret_cast<fi_eq_cm_entry*>(buf);
  size_t pd_len = static_cast<size_t>(n) > sizeof(fi_eq_cm_entry) ? static_cast<size_t>(n) - sizeof(fi_eq_cm_entry) : 0;
  switch (event) {
    case FI_CONNREQ:
      o.Set("type", "connreq");
      if (std::string peer = PeerText(entry->info); !peer.empty()) o.Set("peer", peer);
      *connreq = entry->info;
      break;
    case FI_CONNECTED:
      o.Set("type", "connected");
      break;
    case FI_SHUTDOWN:
      o.Set("type", "shutdown");
      break;
    default:
      o.Set("type", "error");
      o.Set("errno", Napi::Number::New(env, FI_EOTHER));
      o.Set("code", "FI_EOTHER");
      o.Set("message", "unexpected event " + std::to_string(event));
      break;
  }
  if (pd_len > 0 && event != FI_SHUTDOWN) o.Set("privateData", Napi::Buffer<uint8_t>::Copy(env, entry->data, pd_len));
  *out = o;
  return 1;
}

bool EventQueue::TryWait(fid_fabric* fabric) {
  if (eq_ == nullptr) return true;
  fid* f = &eq_->fid;
  return fi_trywait(fabric, &f, 1) == 0;
}

void EventQueue::Close() {
  poller_.Stop();
  if (eq_ != nullptr) {
    fi_close(&eq_->fid);
    eq_ = nullptr;
  }
}

}  // namespace rblk
