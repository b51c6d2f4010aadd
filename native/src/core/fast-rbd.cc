#include "fast-rbd.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <new>

#include "memory-region.h"

namespace rblk {

namespace {

struct PendingOp {
  std::shared_ptr<FastRbdQueue> queue;
  uint64_t user_data;
};

// On a librbd thread.
void OnDone(void* arg, int64_t result) {
  auto* op = static_cast<PendingOp*>(arg);
  op->queue->Push(op->user_data, result);
  delete op;
}

}  // namespace

void FastRbdQueue::Push(uint64_t user_data, int64_t result) {
  bool was_empty;
  {
    std::lock_guard<std::mutex> g(lock);
    was_empty = done.empty();
    done.emplace_back(user_data, result);
  }
  if (was_empty) {
    uint64_t one = 1;
    while (write(event_fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }
}

FastRbdQueue::~FastRbdQueue() {
  if (event_fd >= 0) close(event_fd);
}

FastRbd::~FastRbd() { poller_.Stop(); }

int FastRbd::Start(uv_loop_t* loop, std::function<void(uint64_t, int64_t)> on_done) {
  queue_ = std::make_shared<FastRbdQueue>();
  queue_->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (queue_->event_fd < 0) return -errno;
  on_done_ = std::move(on_done);
  return loop != nullptr ? Watch(loop) : 0;
}

int FastRbd::Watch(uv_loop_t* loop) {
  if (queue_ == nullptr || ending_) return -EBADF;
  loop_ = loop;
  int rc = poller_.Start(loop, queue_->event_fd, [this]() { Drain(); });
  if (rc != 0) return rc;
  // Idle, the watch must not keep the process alive.
  poller_.SetRef(in_flight_ > 0);
  return 0;
}

int FastRbd::Submit(const RbdApi* api, void* image, int op, void* buf, uint32_t len, uint64_t offset, uint64_t user_data) {
  if (queue_ == nullptr || orphaned_) return -EBADF;
  auto* p = new (std::nothrow) PendingOp{queue_, user_data};
  if (p == nullptr) return -ENOMEM;
  int rc = api->submit(image, op, buf, len, offset, OnDone, p);
  if (rc < 0) {
    delete p;
    return rc;
  }
  if (in_flight_++ == 0) poller_.SetRef(true);
  return 0;
}

void FastRbd::Drain() {
  if (ending_) return;
  uint64_t ticks;
  // Clear the eventfd before taking the queue: a result pushed after this read signals it again.
  while (read(queue_->event_fd, &ticks, sizeof ticks) < 0 && errno == EINTR) {
  }
  draining_.clear();
  {
    std::lock_guard<std::mutex> g(queue_->lock);
    draining_.swap(queue_->done);
  }
  for (const auto& d : draining_) {
    in_flight_--;
    if (!orphaned_ && on_done_) on_done_(d.first, d.second);
    // on_done_ may have orphaned this object (the fast path closed from JS).
    if (ending_) return;
  }
  if (in_flight_ == 0) poller_.SetRef(false);
  if (orphaned_ && in_flight_ == 0) Done();
}

// Frees this object outside the poll callback that may be running now: the
// close callback of a handle of its own runs on a later turn of the loop.
void FastRbd::Done() {
  ending_ = true;
  poller_.Stop();
  if (pages_ != nullptr) pages_->Release();
  pages_ = nullptr;
  if (settled_) {
    std::function<void()> settled = std::move(settled_);
    settled_ = nullptr;
    settled();
  }
  if (loop_ == nullptr) {
    delete this;  // never started: no callback of it can be running
    return;
  }
  DeleteLater(loop_, this);
}

void FastRbd::Orphan(FastRbd* self, Memory* pages, std::function<void()> settled) {
  if (self == nullptr) {
    if (pages != nullptr) pages->Release();
    return;
  }
  self->orphaned_ = true;
  self->pages_ = pages;
  if (self->in_flight_ == 0 || self->queue_ == nullptr) {
    self->Done();  // nothing was left: `settled` is not called
    return;
  }
  self->settled_ = std::move(settled);
}

}  // namespace rblk
