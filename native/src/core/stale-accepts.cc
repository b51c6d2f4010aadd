#include "stale-accepts.h"

#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

namespace rblk {

namespace {

// tcpi_state values (Linux include/net/tcp_states.h; not in the uapi headers).
constexpr uint8_t kTcpEstablished = 1;
constexpr uint8_t kTcpCloseWait = 8;
// How long a socket may hold half a request before it is taken for stuck.
constexpr uint64_t kHalfRequestMs = 1000;

uint64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

int PortOf(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(ss).sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(ss).sin6_port);
  return -1;
}

bool IsWildcard(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return reinterpret_cast<const sockaddr_in&>(ss).sin_addr.s_addr == htonl(INADDR_ANY);
  if (ss.ss_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
    return IN6_IS_ADDR_UNSPECIFIED(&a);
  }
  return false;
}

bool SameHost(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr == reinterpret_cast<const sockaddr_in&>(b).sin_addr.s_addr;
  return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr,
                     sizeof(in6_addr)) == 0;
}

// Whether fd is a TCP socket on local's address: a connected one (listening
// false), or the listening one itself (listening true).
bool OnListeningAddress(int fd, const sockaddr_storage& local, bool want_listening = false) {
  int type = 0;
  int listening = 0;
  socklen_t len = sizeof(type);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return false;
  len = sizeof(listening);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || (listening != 0) != want_listening)
    return false;
  sockaddr_storage mine{};
  len = sizeof(mine);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &len) != 0) return false;
  if (mine.ss_family != AF_INET && mine.ss_family != AF_INET6) return false;
  if (PortOf(mine) != PortOf(local)) return false;
  if (!IsWildcard(local) && !SameHost(mine, local)) return false;
  if (want_listening) return true;
  sockaddr_storage peer{};
  len = sizeof(peer);
  return getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0;
}

enum class Waiting { kNo, kYes, kHalfRequest };

// Whether the socket is open both ways (or only the peer closed) and has
// sent no data since it was accepted (RFC 4898 tcpEStatsDataSegsOut, Linux
// 4.6+): the provider never answered it. Unknown counts as answered: never
// shut a socket down on a guess. kHalfRequest: it has received bytes and has
// none queued, so the provider has read part of a request and waits for the
// rest (or has a whole one in its event queue, for as long as the listener
// takes to answer it: Reap tells the two apart by time).
Waiting StillWaiting(int fd) {
  tcp_info ti{};
  socklen_t len = sizeof(ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return Waiting::kNo;
  if (len < offsetof(tcp_info, tcpi_data_segs_out) + sizeof(ti.tcpi_data_segs_out)) return Waiting::kNo;
  if (ti.tcpi_state != kTcpEstablished && ti.tcpi_state != kTcpCloseWait) return Waiting::kNo;
  if (ti.tcpi_data_segs_out != 0) return Waiting::kNo;
  int queued = 0;
  if (ti.tcpi_bytes_received > 0 && ioctl(fd, SIOCINQ, &queued) == 0 && queued == 0) return Waiting::kHalfRequest;
  return Waiting::kYes;
}

// Calls fn(fd) for every socket of this process in /proc/self/fd.
template <typename Fn>
void ForEachSocket(Fn fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int own = dirfd(dir);
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long n = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || n == own) continue;
    int fd = static_cast<int>(n);
    struct stat st{};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    fn(fd, st);
  }
  closedir(dir);
}

}  // namespace

int BoundRequestReads(const sockaddr_storage& local, unsigned timeout_ms) {
  int bounded = 0;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout_ms % 1000) * 1000);
  ForEachSocket([&](int fd, const struct stat&) {
    if (!OnListeningAddress(fd, local, true)) return;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0) ++bounded;
  });
  return bounded;
}

int StaleAccepts::Reap(uint64_t idle_ms) {
  const uint64_t now = NowMs();
  std::unordered_set<ino_t> present;
  int reaped = 0;
  ForEachSocket([&](int fd, const struct stat& st) {
    if (!OnListeningAddress(fd, local_)) return;
    const Waiting waiting = StillWaiting(fd);
    if (waiting == Waiting::kNo) return;
    present.insert(st.st_ino);
    auto [it, fresh] = first_seen_.emplace(st.st_ino, Seen{now, 0});
    Seen& seen = it->second;
    seen.half_passes = waiting == Waiting::kHalfRequest ? seen.half_passes + 1 : 0;
    // A half-sent request holds the provider's CM progress (stale-accepts.h):
    // seen so on two passes in a row and for a second since the accept, it is
    // no request the listener is about to answer (that takes a turn of the
    // event loop, however short the reaping interval is).
    const bool stuck = seen.half_passes >= 2 && now - seen.since >= kHalfRequestMs;
    if (idle_ms != 0 && !stuck && (fresh || now - seen.since < idle_ms)) return;
    // The provider keeps the fd and closes it on the end-of-file this causes.
    if (shutdown(fd, SHUT_RDWR) == 0) ++reaped;
    first_seen_.erase(it);
    present.erase(st.st_ino);
  });
  for (auto it = first_seen_.begin(); it != first_seen_.end();) {
    if (present.count(it->first) == 0)
      it = first_seen_.erase(it);
    else
      ++it;
  }
  return reaped;
}

}  // namespace rblk
