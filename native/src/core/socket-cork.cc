#include "socket-cork.h"

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

#include <rdma/fi_cm.h>

#include "domain.h"

namespace rblk {
namespace {

bool SameName(int fd, bool peer, const sockaddr_storage& want, size_t want_len) {
  sockaddr_storage got{};
  socklen_t len = sizeof got;
  int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&got), &len) : getsockname(fd, reinterpret_cast<sockaddr*>(&got), &len);
  return rc == 0 && len == want_len && std::memcmp(&got, &want, len) == 0;
}

}  // namespace

int TcpSocketOf(fid_ep* ep) {
  sockaddr_storage local{}, peer{};
  size_t local_len = sizeof local, peer_len = sizeof peer;
  if (fi_getname(&ep->fid, &local, &local_len) != 0 || fi_getpeer(ep, &peer, &peer_len) != 0) return -1;
  if (local.ss_family != AF_INET && local.ss_family != AF_INET6) return -1;
  if (local_len > sizeof local || peer_len > sizeof peer) return -1;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd < 0 || fd == dirfd(dir)) continue;
    struct stat st{};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int type = 0, proto = 0;
    socklen_t tl = sizeof type, pl = sizeof proto;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM) continue;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_PROTOCOL, &proto, &pl) != 0 || proto != IPPROTO_TCP) continue;
    if (SameName(static_cast<int>(fd), false, local, local_len) && SameName(static_cast<int>(fd), true, peer, peer_len)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

void SocketCork::Open(fid_ep* ep, const Domain* domain, const Napi::Value& option) {
  if (!option.IsUndefined() && !option.ToBoolean().Value()) return;
  if (domain->rdm() || std::strcmp(domain->info()->fabric_attr->prov_name, "tcp") != 0) return;
  fd_ = TcpSocketOf(ep);
}

void SocketCork::Post() {
  if (++posts_ != 2 || fd_ < 0) return;
  int on = 1;
  if (setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &on, sizeof on) == 0) {
    corked_ = true;
    ++corks_;
  } else {
    fd_ = -1;  // not the socket it was taken for: never again
  }
}

void SocketCork::End() {
  posts_ = 0;
  if (!corked_) return;
  corked_ = false;
  int off = 0;
  // Uncorking pushes out what the burst queued (tcp(7) TCP_CORK).
  if (setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &off, sizeof off) == 0) ++uncorks_;
}

}  // namespace rblk
