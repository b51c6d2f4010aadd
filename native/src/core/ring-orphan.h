// An io_uring ring whose fast path has gone (its connection was dropped) while
// I/O of it is still in the kernel (docs/target.md "A lost connection's
// commands"). Waiting for that I/O at the close would block the loop, and so
// every other connection, for as long as a slow or hung device takes; instead
// the ring, its eventfd watch and the slots' pages (the kernel may still be
// reading or writing them) live on here until the last completion arrives.
// Then the ring is closed, the pages released, and `settled` called, on the
// loop thread. The object frees itself.
#pragma once
#include <uv.h>

#include <cstddef>
#include <functional>

#include "poller.h"
#include "uring-c-api.h"

namespace rblk {

struct Memory;

class RingOrphan {
 public:
  // Takes `ring` (with `in_flight` requests submitted and unreaped) and a
  // reference on `pages`, retained by the caller for it. On failure to watch
  // the ring it falls back to the blocking close, and still calls settled.
  static void Adopt(uv_loop_t* loop, const UringApi* api, void* ring, int event_fd, size_t in_flight, Memory* pages,
                    std::function<void()> settled);

 private:
  RingOrphan() = default;
  RingOrphan(const RingOrphan&) = delete;
  RingOrphan& operator=(const RingOrphan&) = delete;
  void Drain();
  void Done();

  const UringApi* api_ = nullptr;
  void* ring_ = nullptr;
  size_t in_flight_ = 0;
  Memory* pages_ = nullptr;
  std::function<void()> settled_;
  uv_loop_t* loop_ = nullptr;
  FdPoller poller_;
  bool ending_ = false;
};

}  // namespace rblk
