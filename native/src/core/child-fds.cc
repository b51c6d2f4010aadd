#include "child-fds.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <mutex>

namespace rblk {

namespace {

// Runs in the child, between fork and exec: async-signal-safe calls only.
void MarkInheritedCloexec() {
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  // Kernels before 5.11: one fcntl per possible descriptor.
  rlimit lim{};
  const rlim_t max = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY ? lim.rlim_cur : 65536;
  for (rlim_t fd = 3; fd < max; ++fd) {
    int flags = fcntl(static_cast<int>(fd), F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC);
  }
}

}  // namespace

void ProtectChildFds() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, MarkInheritedCloexec); });
}

}  // namespace rblk
