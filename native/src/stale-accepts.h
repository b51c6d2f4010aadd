// Accepted TCP sockets that never became a fabric connection request.
//
// The tcp and sockets providers accept() a TCP connection on the passive
// endpoint's port and then wait, with no timeout, for the peer's CM request
// (libfabric 1.17 prov/tcp: tcpx_accept adds the socket to the EQ's wait set
// until the request arrives; prov/sockets: the CM thread monitors it). A peer
// that connects and sends nothing, or whose request is lost in a partition,
// holds a socket, an fd and a connection handle until the process exits:
// closing the passive endpoint does not free them either.
//
// This finds such sockets from outside the provider and shuts them down
// (shutdown(2), never close(2): the fd stays the provider's). The provider
// then reads end-of-file on it and runs its own error path, which closes the
// socket and frees the handle. See docs/operations.md, "Connection limits".
#pragma once
#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <unordered_map>

namespace rblk {

class StaleAccepts {
 public:
  // local: the passive endpoint's address (a wildcard address matches any local address).
  explicit StaleAccepts(const sockaddr_storage& local) : local_(local) {}

  // Shuts down every connected TCP socket of this process on the listening
  // address that has sent no data in the idleMs since it was first seen.
  // A socket that has sent data was answered (accepted or rejected) by the
  // provider, so it is no longer waiting for a request. Returns how many.
  // idleMs 0 shuts down every waiting socket at once (teardown).
  int Reap(uint64_t idle_ms);

 private:
  sockaddr_storage local_;
  // socket inode → when it was first seen waiting (CLOCK_MONOTONIC ms)
  std::unordered_map<ino_t, uint64_t> first_seen_;
};

}  // namespace rblk
