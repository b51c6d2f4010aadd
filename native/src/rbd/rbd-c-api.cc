// The C table of rbd-c-api.h, over librbd's asynchronous API. Called from the
// loop thread (the fast path runs there); `done` runs on librbd's threads.
#include "rbd-c-api.h"

#include <rbd/librbd.h>

#include <cerrno>
#include <memory>
#include <new>

#include "rbd-image.h"

namespace rblk {

namespace {

struct Op {
  RbdFastDone done;
  void* arg;
  // The image's queue, held: the owner hears of a blocklist even if the image closed since.
  std::shared_ptr<RbdQueue> queue;
};

void OnComplete(rbd_completion_t c, void* arg) {
  auto* op = static_cast<Op*>(arg);
  int64_t r = rbd_aio_get_return_value(c);
  rbd_aio_release(c);
  // Told before the command's own completion, so that the backend is fenced by
  // the time the command's failure is answered (the fast path may not answer it
  // at all: its connection may be gone).
  if (r == -ESHUTDOWN && op->queue != nullptr) op->queue->TellBlocklisted();
  RbdFastDone done = op->done;
  void* a = op->arg;
  delete op;
  done(a, r);
}

int Submit(void* handle, int kind, void* buf, uint32_t len, uint64_t offset, RbdFastDone done, void* arg) {
  auto* fast = static_cast<RbdFastImage*>(handle);
  if (fast == nullptr || fast->image == nullptr) return -EBADF;
  void* image = fast->image;
  auto* op = new (std::nothrow) Op{done, arg, fast->queue};
  if (op == nullptr) return -ENOMEM;
  rbd_completion_t c = nullptr;
  int rc = rbd_aio_create_completion(op, OnComplete, &c);
  if (rc < 0) {
    delete op;
    return rc;
  }
  auto* img = static_cast<rbd_image_t>(image);
  switch (kind) {
    case kRbdFastRead:
      rc = rbd_aio_read(img, offset, len, static_cast<char*>(buf), c);
      break;
    case kRbdFastWrite:
      rc = static_cast<int>(rbd_aio_write(img, offset, len, static_cast<const char*>(buf), c));
      break;
    default:
      rc = rbd_aio_flush(img, c);
      break;
  }
  if (rc < 0) {
    // A refused submission never calls back.
    rbd_aio_release(c);
    delete op;
    if (rc == -ESHUTDOWN && fast->queue != nullptr) fast->queue->TellBlocklisted();
    return rc;
  }
  return 0;
}

const RbdApi kApi = {kRbdApiMagic, kRbdApiVersion, Submit};

}  // namespace

const RbdApi* GetRbdApi() { return &kApi; }

}  // namespace rblk
