// Corked bursts on a libfabric tcp MSG endpoint (docs/transport.md "Corked
// bursts"). libfabric 1.17's tcp provider sends each operation with its own
// sendmsg(2), and TCP_NODELAY pushes each out as its own segment: a burst of
// N answers costs the kernel N transmits (on loopback, N deliveries and
// wake-ups of the peer too). Corking the socket from the burst's second
// post to its end lets the kernel send them as one.
//
// libfabric does not hand the socket out, but its tcp provider names an
// endpoint by its socket's own addresses: fi_getname is getsockname(2) and
// fi_getpeer is getpeername(2) on it. A TCP connection's address pair is
// unique, so the one fd of this process whose two names match both is that
// socket.
#pragma once
#include <napi.h>
#include <rdma/fi_endpoint.h>

#include <cstdint>

namespace rblk {

class Domain;

// The fd, or -1 when no socket of this process matches (another provider,
// or a name that is not an IPv4/IPv6 address). The fd stays the endpoint's:
// use it only while the endpoint is open, and never close it.
int TcpSocketOf(fid_ep* ep);

// One endpoint's cork. Its owner calls Post before each post of a burst and
// End when the burst is over, both under the endpoint's lock and only while
// the endpoint is open; Forget when the endpoint closes (its fd number may
// then be reused).
class SocketCork {
 public:
  // At the owner's start: takes the endpoint's socket when `option` (the
  // owner's `cork`, default true) allows and the domain is libfabric's tcp
  // provider over MSG endpoints, the one that is a socket per connection
  // sending each operation by itself. Elsewhere it corks nothing.
  void Open(fid_ep* ep, const Domain* domain, const Napi::Value& option);
  void Post();
  void End();
  void Forget() {
    fd_ = -1;
    corked_ = false;
    posts_ = 0;
  }
  uint64_t corks() const { return corks_; }
  uint64_t uncorks() const { return uncorks_; }

 private:
  int fd_ = -1;
  uint32_t posts_ = 0;  // since the last End
  bool corked_ = false;
  uint64_t corks_ = 0, uncorks_ = 0;
};

}  // namespace rblk
