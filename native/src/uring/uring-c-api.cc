// The C table of uring-c-api.h, over liburing. Used from the loop thread only
// (the fast path runs there), like IoRing.
#include "uring-c-api.h"

#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>
#include <new>

namespace rblk {

namespace {

struct Ring {
  io_uring ring{};
  int event_fd = -1;
  size_t in_flight = 0;
  size_t unsubmitted = 0;
};

void* Open(unsigned entries, int* event_fd, int* err, bool single_issuer) {
  auto* r = new (std::nothrow) Ring;
  if (r == nullptr) {
    *err = ENOMEM;
    return nullptr;
  }
  int rc = -EINVAL;
  for (unsigned f : {single_issuer ? static_cast<unsigned>(IORING_SETUP_SINGLE_ISSUER) : 0u, 0u}) {
    rc = io_uring_queue_init(entries, &r->ring, f);
    if (rc != -EINVAL) break;
  }
  if (rc < 0) {
    delete r;
    *err = -rc;
    return nullptr;
  }
  r->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (r->event_fd < 0 || (rc = io_uring_register_eventfd(&r->ring, r->event_fd)) < 0) {
    *err = r->event_fd < 0 ? errno : -rc;
    if (r->event_fd >= 0) close(r->event_fd);
    io_uring_queue_exit(&r->ring);
    delete r;
    return nullptr;
  }
  *event_fd = r->event_fd;
  return r;
}

int Submit(void* ring) {
  auto* r = static_cast<Ring*>(ring);
  if (r->unsubmitted == 0) return 0;
  int rc = io_uring_submit(&r->ring);
  if (rc >= 0) r->unsubmitted = r->unsubmitted > static_cast<size_t>(rc) ? r->unsubmitted - rc : 0;
  return rc;
}

int Queue(void* ring, int op, int fd, void* buf, uint32_t len, uint64_t offset, bool dsync, uint64_t user_data) {
  auto* r = static_cast<Ring*>(ring);
  io_uring_sqe* sqe = io_uring_get_sqe(&r->ring);
  if (sqe == nullptr) {
    Submit(ring);
    sqe = io_uring_get_sqe(&r->ring);
    if (sqe == nullptr) return -EBUSY;
  }
  switch (op) {
    case kUringRead:
      io_uring_prep_read(sqe, fd, buf, len, offset);
      break;
    case kUringWrite:
      io_uring_prep_write(sqe, fd, buf, len, offset);
      if (dsync) sqe->rw_flags = RWF_DSYNC;
      break;
    default:
      io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
      break;
  }
  io_uring_sqe_set_data64(sqe, user_data);
  r->in_flight++;
  r->unsubmitted++;
  return 0;
}

unsigned Take(Ring* r, UringCompletion* out, unsigned max) {
  io_uring_cqe* cqe = nullptr;
  unsigned n = 0;
  while (n < max && io_uring_peek_cqe(&r->ring, &cqe) == 0 && cqe != nullptr) {
    out[n].user_data = cqe->user_data;
    out[n].res = cqe->res;
    io_uring_cqe_seen(&r->ring, cqe);
    r->in_flight--;
    n++;
  }
  return n;
}

void ClearEvent(Ring* r) {
  uint64_t ticks;
  while (read(r->event_fd, &ticks, sizeof ticks) < 0 && errno == EINTR) {
  }
}

unsigned Reap(void* ring, UringCompletion* out, unsigned max) {
  auto* r = static_cast<Ring*>(ring);
  ClearEvent(r);
  return Take(r, out, max);
}

unsigned Peek(void* ring, UringCompletion* out, unsigned max) {
  auto* r = static_cast<Ring*>(ring);
  unsigned n = Take(r, out, max);
  // Nothing left to complete: any count in the event fd is for what was just taken.
  if (n > 0 && r->in_flight == 0) ClearEvent(r);
  return n;
}

void Close(void* ring) {
  auto* r = static_cast<Ring*>(ring);
  Submit(ring);
  while (r->in_flight > 0) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&r->ring, &cqe) < 0) break;
    io_uring_cqe_seen(&r->ring, cqe);
    r->in_flight--;
  }
  io_uring_queue_exit(&r->ring);
  close(r->event_fd);
  delete r;
}

const UringApi kApi = {kUringApiMagic, kUringApiVersion, Open, Queue, Submit, Reap, Peek, Close};

}  // namespace

const UringApi* GetUringApi() { return &kApi; }

}  // namespace rblk
