#include "fast-rbd.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <new>
#include <vector>

#include "args.h"
#include "errors.h"
#include "fast-backend.h"

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

int FastRbd::Start(uv_loop_t* loop, std::function<void(uint64_t, int64_t)> on_done, std::function<void()> on_ready) {
  queue_ = std::make_shared<FastRbdQueue>();
  queue_->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (queue_->event_fd < 0) return -errno;
  on_done_ = std::move(on_done);
  on_ready_ = std::move(on_ready);
  return loop != nullptr ? Watch(loop) : 0;
}

int FastRbd::Watch(uv_loop_t* loop) {
  if (queue_ == nullptr || ending_) return -EBADF;
  loop_ = loop;
  int rc = poller_.Start(loop, queue_->event_fd, [this]() {
    if (orphaned_ || !on_ready_) Drain();
    else on_ready_();
  });
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
  ReleaseAndSettle(pages_, settled_);
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

namespace {

// The fast path's backend for RBD volumes (fast-backend.h): FastRbd above,
// opened with the connection's first RBD LUN. A dsync write (FUA, or WCE 0)
// is the write, then a flush, as RbdBackend.write does it in JavaScript
// (target/backend/rbd/): its result goes to the fast path once the flush is done.
class RbdBackend : public FastBackend {
 public:
  explicit RbdBackend(const FastBackendEnv& env)
      : on_done_(env.on_done), on_ready_(env.on_ready), loop_(env.loop), writes_(env.slots) {}
  ~RbdBackend() override { Abandon(nullptr, nullptr); }

  int Start(bool watch) {
    rbd_ = new FastRbd;
    return rbd_->Start(watch ? loop_ : nullptr, [this](uint64_t u, int64_t r) { OnRbd(static_cast<uint32_t>(u), r); }, on_ready_);
  }

  int Queue(const FastVolume& v, const FastIo& io) override {
    if (rbd_ == nullptr || io.slot >= writes_.size()) return -EBADF;
    const auto* api = static_cast<const RbdApi*>(v.api);
    writes_[io.slot] = Write{io.write, io.write && io.dsync, false, io.length, v};
    return rbd_->Submit(api, v.handle, io.write ? kRbdFastWrite : kRbdFastRead, io.buf, io.length, io.offset, io.slot);
  }

  int event_fd() const override { return rbd_ != nullptr ? rbd_->event_fd() : -1; }
  void Reap() override {
    if (rbd_ != nullptr) rbd_->Drain();
  }
  void Unwatch() override {
    if (rbd_ != nullptr) rbd_->Unwatch();
  }
  void Watch(uv_loop_t* loop) override {
    if (rbd_ != nullptr) rbd_->Watch(loop);
  }
  size_t in_flight() const override { return rbd_ != nullptr ? rbd_->in_flight() : 0; }

  // librbd may still be writing into the pages: FastRbd::Orphan keeps them
  // until its last completion (fast-rbd.h).
  void Abandon(Memory* pages, std::function<void()> settled) override {
    FastRbd* rbd = rbd_;
    rbd_ = nullptr;
    if (rbd == nullptr) {
      if (pages != nullptr) pages->Release();
      return;
    }
    FastRbd::Orphan(rbd, pages, std::move(settled));
  }

 private:
  struct Write {
    bool write = false;
    bool flush = false;     // a dsync write: flush once written
    bool flushing = false;  // the write is done, its flush is in librbd
    uint32_t length = 0;
    FastVolume volume;
  };

  void OnRbd(uint32_t slot, int64_t result) {
    if (slot < writes_.size()) {
      Write& w = writes_[slot];
      if (w.flush && !w.flushing && result >= 0 && rbd_ != nullptr) {
        w.flushing = true;
        int r = rbd_->Submit(static_cast<const RbdApi*>(w.volume.api), w.volume.handle, kRbdFastFlush, nullptr, 0, 0, slot);
        if (r == 0) return;
        result = r;
      }
      // librbd's write and flush results are not byte counts to check.
      if (w.write && result >= 0) result = w.length;
      w = Write{};
    }
    on_done_(slot, result);
  }

  std::function<void(uint32_t, int64_t)> on_done_;
  std::function<void()> on_ready_;
  uv_loop_t* loop_;
  std::vector<Write> writes_;
  FastRbd* rbd_ = nullptr;
};

}  // namespace

namespace {

bool RbdClaims(Napi::Object record) {
  Napi::Value api = record.Get("rbdApi");
  return !api.IsUndefined() && !api.IsNull();
}

// rbdApi (rblk_rbd's table, rbd-c-api.h) and rbdImage (an open image); fd is unused.
FastVolume RbdVolume(Napi::Env env, Napi::Object record) {
  Napi::Value api = record.Get("rbdApi");
  Napi::Value image = record.Get("rbdImage");
  if (!api.IsExternal() || !image.IsExternal())
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FastPath.setLun", "rbdApi and rbdImage must come from rblk_rbd");
  const RbdApi* t = api.As<Napi::External<RbdApi>>().Data();
  if (t == nullptr || t->magic != kRbdApiMagic || t->version != kRbdApiVersion)
    throw MakeUsageError(env, "ERR_INVALID_ARG_VALUE", EINVAL, "FastPath.setLun", "rblk_rbd's table is of another version");
  FastVolume v;
  v.api = t;
  v.handle = image.As<Napi::External<void>>().Data();
  if (v.handle == nullptr) throw MakeUsageError(env, "ERR_INVALID_ARG_VALUE", EINVAL, "FastPath.setLun", "the rbd image is not open");
  return v;
}

// librbd's completions, watched where the ring's are (the JS loop, or the
// connection's reactor): opened with the first RBD LUN, so a connection to
// file volumes has no eventfd for it.
std::unique_ptr<FastBackend> OpenRbd(const FastBackendEnv& env, int* err, const char** op) {
  auto b = std::make_unique<RbdBackend>(env);
  int rc = b->Start(env.watch);
  if (rc != 0) {
    *err = rc < 0 ? -rc : EIO;
    *op = "eventfd";
    return nullptr;  // nothing in flight: its destructor frees the queue
  }
  return b;
}

}  // namespace

extern const FastBackendKind kRbdBackend;
const FastBackendKind kRbdBackend = {"rbd", false, RbdClaims, RbdVolume, OpenRbd};

}  // namespace rblk
