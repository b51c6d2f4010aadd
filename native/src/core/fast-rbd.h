// The fast path's second completion source (docs/architecture.md "Completions",
// docs/target.md "Fast path"): READ and WRITE to a Ceph RBD volume, submitted
// through rblk_rbd's C table (rbd-c-api.h) so that this addon does not link
// librbd. librbd completes on its own threads: there a completion only goes
// into a lock-protected queue and signals an eventfd, which is watched where
// the io_uring ring's is (an FdPoller on the JS loop, or the reactor's epoll
// set once the connection is attached to one); that thread takes the queue
// and hands each (user data, result) to the fast path.
//
// Threads: FastRbdQueue::Push runs on librbd's threads and takes only the
// queue's own mutex (`lock`); everything else here runs where the fast path's
// data path runs (fast-path.h "Threads"), under the connection's lock. An
// orphan (Orphan()) is owned by the JS loop alone: its watch and its last
// completion run there, after the connection is gone.
//
// Each I/O in flight holds the queue (shared_ptr), so a completion never
// touches freed memory. When the fast path goes away with I/O still in
// librbd (a dropped connection, a killed initiator), Orphan() keeps this
// object, the eventfd watch and a reference to the slots' pages alive until
// the last completion has arrived: librbd may still be writing into them.
#pragma once
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "poller.h"
#include "rbd-c-api.h"

namespace rblk {

struct Memory;

struct FastRbdQueue {
  std::mutex lock;
  std::vector<std::pair<uint64_t, int64_t>> done;
  int event_fd = -1;
  void Push(uint64_t user_data, int64_t result);
  ~FastRbdQueue();
};

class FastRbd {
 public:
  FastRbd() = default;
  FastRbd(const FastRbd&) = delete;
  FastRbd& operator=(const FastRbd&) = delete;
  ~FastRbd();

  // Creates the eventfd and watches it on `loop` (without a loop: not
  // watched yet, a reactor's epoll set takes it, reactor.h); 0 or -errno.
  // When it is readable, the watch calls on_ready, whose caller takes its
  // locks and calls Drain; once orphaned, it drains by itself.
  int Start(uv_loop_t* loop, std::function<void(uint64_t, int64_t)> on_done, std::function<void()> on_ready);
  // Moves the watch off the JS loop (a reactor takes the fd) and back.
  void Unwatch() { poller_.Stop(); }
  int Watch(uv_loop_t* loop);
  int event_fd() const { return queue_ != nullptr ? queue_->event_fd : -1; }
  // Takes the queue and hands each result on; run when event_fd is readable.
  void Drain();
  // 0, or the -errno librbd refused it with (then on_done never runs for it).
  int Submit(const RbdApi* api, void* image, int op, void* buf, uint32_t len, uint64_t offset, uint64_t user_data);
  size_t in_flight() const { return in_flight_; }
  // The owner is going: no more on_done; frees itself (releasing `pages`,
  // retained by the caller for it) once nothing is left in librbd, and then
  // calls `settled` (on the loop thread), if given and anything was left.
  static void Orphan(FastRbd* self, Memory* pages, std::function<void()> settled = nullptr);

 private:
  void Done();

  std::shared_ptr<FastRbdQueue> queue_;
  FdPoller poller_;
  std::function<void(uint64_t, int64_t)> on_done_;
  std::function<void()> on_ready_;
  std::vector<std::pair<uint64_t, int64_t>> draining_;
  size_t in_flight_ = 0;
  bool orphaned_ = false;
  bool ending_ = false;
  Memory* pages_ = nullptr;
  std::function<void()> settled_;
  uv_loop_t* loop_ = nullptr;
};

}  // namespace rblk
