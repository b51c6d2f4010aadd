// The fast path's backend for file and block-device volumes (fast-backend.h):
// one io_uring ring per connection, reached through rblk_uring's C table
// (uring-c-api.h) so that this addon does not link liburing. Each command's
// I/O is queued during a CQ drain and goes to the kernel four at a time, the
// drain's end submitting what is left; the ring signals an eventfd, watched on the JS loop or by
// the connection's reactor. A FUA write is one write with RWF_DSYNC.
#include <memory>

#include "args.h"
#include "fast-backend.h"
#include "memory-region.h"
#include "poller.h"
#include "ring-orphan.h"

namespace rblk {

namespace {

constexpr unsigned kReap = 64;
// A drain's I/O goes to the kernel four at a time as it is queued, not all at
// the drain's end, so the disk starts on the first reads of a batch while the
// rest are still being taken (as the JS ring's kEagerSubmit does in pairs,
// native/src/uring/io-ring.cc: a command costs the fast path less, so its
// batches can be larger for the same delay, and fewer io_uring_enter calls
// cost less CPU; docs/performance.md "Submitting io_uring reads as they are
// queued").
constexpr unsigned kEagerSubmit = 4;

class UringBackend : public FastBackend {
 public:
  UringBackend(const FastBackendEnv& env, void* ring, int event_fd)
      : api_(env.uring), ring_(ring), event_fd_(event_fd), loop_(env.loop), on_done_(env.on_done), on_ready_(env.on_ready) {}
  ~UringBackend() override {
    poller_.Stop();
    if (ring_ != nullptr) api_->close(ring_);
  }

  int Queue(const FastVolume& v, const FastIo& io) override {
    if (ring_ == nullptr) return -EBADF;
    int rc = api_->queue(ring_, io.write ? kUringWrite : kUringRead, v.fd, io.buf, io.length, io.offset, io.dsync, io.slot);
    if (rc != 0) return rc;
    in_flight_++;
    poller_.SetRef(true);  // the kernel holds I/O of ours: the process waits for it
    if (++unsubmitted_ >= kEagerSubmit) SubmitQueued();
    return 0;
  }

  // The drain's end: submits the rest, then answers at once what the kernel
  // finished inside that io_uring_enter (a buffered read the page cache
  // held), in the same wake-up instead of the event fd's next one. A busy
  // poll's drains end here too, so the spin also sees the ring
  // (docs/architecture.md "Busy polling"; docs/performance.md "Issue 29's QD1
  // gap").
  unsigned Submit() override {
    if (ring_ == nullptr) return 0;
    SubmitQueued();
    return Hand(api_->peek);
  }

  int event_fd() const override { return ring_ != nullptr ? event_fd_ : -1; }

  void Reap() override {
    while (Hand(api_->reap) > 0) {
    }
  }

  void Unwatch() override { poller_.Stop(); }

  void Watch(uv_loop_t* loop) override {
    if (ring_ == nullptr) return;
    loop_ = loop;
    if (poller_.Start(loop, event_fd_, on_ready_) == 0) poller_.SetRef(in_flight_ > 0);
  }

  size_t in_flight() const override { return ring_ != nullptr ? in_flight_ : 0; }

  // Neither waited for here: a slow or hung device would stop the loop, and
  // every other connection, until it answered (docs/target.md "A lost
  // connection's commands"). The ring lives on in a RingOrphan instead.
  void Abandon(Memory* pages, std::function<void()> settled) override {
    poller_.Stop();
    if (ring_ == nullptr) return;
    void* ring = ring_;
    ring_ = nullptr;
    if (in_flight_ > 0) {
      RingOrphan::Adopt(loop_, api_, ring, event_fd_, in_flight_, pages, std::move(settled));
      return;
    }
    api_->close(ring);
    if (pages != nullptr) pages->Release();
    if (settled) settled();
  }

  // Watched on the loop unless a reactor already serves the connection
  // (otherwise the reactor's attach moves the watch there, Unwatch).
  int Start(bool watch) {
    if (!watch) return 0;
    int rc = poller_.Start(loop_, event_fd_, on_ready_);
    poller_.SetRef(false);  // the endpoint keeps the loop alive; an idle ring must not
    return rc;
  }

 private:
  const UringApi* api_;
  void* ring_;
  int event_fd_;
  uv_loop_t* loop_;
  std::function<void(uint32_t, int64_t)> on_done_;
  std::function<void()> on_ready_;
  FdPoller poller_;
  size_t in_flight_ = 0;  // queued in the ring and not yet reaped
  unsigned unsubmitted_ = 0;  // queued since the last submit

  void SubmitQueued() {
    unsubmitted_ = 0;
    int rc = api_->submit(ring_);
    (void)rc;  // EAGAIN/EBUSY: submitted at the next drain or ring completion
  }

  // One batch of completions from `take` (the table's reap or peek) to
  // on_done: how many it took, or 0 once on_done abandoned the ring (a close
  // from JS).
  unsigned Hand(unsigned (*take)(void*, UringCompletion*, unsigned)) {
    if (ring_ == nullptr) return 0;
    UringCompletion done[kReap];
    unsigned n = take(ring_, done, kReap);
    in_flight_ = n >= in_flight_ ? 0 : in_flight_ - n;
    for (unsigned i = 0; i < n; ++i) {
      on_done_(static_cast<uint32_t>(done[i].user_data), done[i].res);
      if (ring_ == nullptr) return 0;
    }
    if (in_flight_ == 0) poller_.SetRef(false);  // idle, the ring must not keep the process alive
    return n;
  }
};

}  // namespace

// Every record that no other kind claims: a file or block device's fd.
namespace {

bool UringClaims(Napi::Object) { return true; }

FastVolume UringVolume(Napi::Env env, Napi::Object record) {
  FastVolume v;
  v.fd = static_cast<int>(ToU32(env, record.Get("fd"), "FastPath.setLun", "fd"));
  return v;
}

std::unique_ptr<FastBackend> OpenUring(const FastBackendEnv& env, int* err, const char** op) {
  int event_fd = -1;
  // A ring a reactor thread drives is opened without SINGLE_ISSUER (uring-c-api.h).
  void* ring = env.uring->open(env.slots, &event_fd, err, !env.reactor);
  if (ring == nullptr) {
    *op = "io_uring_queue_init";
    return nullptr;
  }
  auto b = std::make_unique<UringBackend>(env, ring, event_fd);
  if (b->Start(env.watch) != 0) {
    *err = EIO;
    *op = "uv_poll_start";
    return nullptr;  // its destructor closes the ring
  }
  return b;
}

}  // namespace

extern const FastBackendKind kUringBackend;
const FastBackendKind kUringBackend = {"file", true, UringClaims, UringVolume, OpenUring};

}  // namespace rblk
