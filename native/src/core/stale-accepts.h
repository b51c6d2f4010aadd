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

// A peer can also send the first bytes of a CM request and then stop: the tcp
// provider reads the rest with a blocking recv(2) on the accepted socket,
// inside fi_eq_read on the thread that reads the listener's event queue
// (rblkd's only JS thread), and the sockets provider does the same on its CM
// thread (docs/transport.md, "Half-sent connection requests"). One 32-byte header with a
// nonzero length then stops the whole daemon. Linux accepted sockets inherit
// SO_RCVTIMEO from the listening socket, so a receive timeout set on it
// bounds that read: the provider sees EAGAIN, keeps the socket waiting (it
// then reads garbage and drops it, or StaleAccepts reaps it). A real
// request is one segment (the providers send header and data in one send),
// so it is never cut short. Returns how many listening sockets of this
// process on `local` got the timeout (0 where the provider has none: verbs
// listens through rdma_cm).
int BoundRequestReads(const sockaddr_storage& local, unsigned timeout_ms);

class StaleAccepts {
 public:
  // local: the passive endpoint's address (a wildcard address matches any local address).
  explicit StaleAccepts(const sockaddr_storage& local) : local_(local) {}

  // Shuts down every connected TCP socket of this process on the listening
  // address that has sent no data in the idleMs since it was first seen, and
  // sooner one found holding half a request on two calls in a row.
  // A socket that has sent data was answered (accepted or rejected) by the
  // provider, so it is no longer waiting for a request. Returns how many.
  // idleMs 0 shuts down every waiting socket at once (teardown).
  int Reap(uint64_t idle_ms);

 private:
  sockaddr_storage local_;
  struct Seen {
    uint64_t since;       // when it was first seen waiting (CLOCK_MONOTONIC ms)
    unsigned half_passes;  // passes in a row that found it holding half a request
  };
  std::unordered_map<ino_t, Seen> first_seen_;  // by socket inode
};

}  // namespace rblk
