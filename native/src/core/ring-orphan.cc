#include "ring-orphan.h"

#include "memory-region.h"

namespace rblk {

void RingOrphan::Adopt(uv_loop_t* loop, const UringApi* api, void* ring, int event_fd, size_t in_flight, Memory* pages,
                       std::function<void()> settled) {
  auto* self = new RingOrphan;
  self->api_ = api;
  self->ring_ = ring;
  self->in_flight_ = in_flight;
  self->pages_ = pages;
  self->settled_ = std::move(settled);
  self->loop_ = loop;
  // What the fast path queued and had not submitted yet goes now, so that it
  // lands while this still watches, not at some later close.
  api->submit(ring);
  if (in_flight == 0 || self->poller_.Start(loop, event_fd, [self]() { self->Drain(); }) != 0) {
    self->Done();
    return;
  }
  // Until the kernel is done with the pages, the process must not exit under it.
  self->poller_.SetRef(true);
  // Completions that came before the watch started signal nothing more.
  self->Drain();
}

void RingOrphan::Drain() {
  if (ending_) return;
  UringCompletion done[64];
  for (;;) {
    unsigned n = api_->reap(ring_, done, 64);
    if (n == 0) break;
    in_flight_ = n >= in_flight_ ? 0 : in_flight_ - n;
  }
  if (in_flight_ == 0) Done();
}

// Closes the ring (nothing is left in it, so the close does not wait), then
// frees this object outside the poll callback that may be running now.
void RingOrphan::Done() {
  ending_ = true;
  poller_.Stop();
  api_->close(ring_);  // the blocking fallback too, when the watch could not start
  ring_ = nullptr;
  ReleaseAndSettle(pages_, settled_);
  DeleteLater(loop_, this);
}

}  // namespace rblk
