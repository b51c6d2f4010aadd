// The C table of rbd-c-api.h, over librbd's asynchronous API. Called from the
// loop thread (the fast path runs there); `done` runs on librbd's threads.
#include "rbd-c-api.h"

#include <rbd/librbd.h>

#include <cerrno>
#include <new>

namespace rblk {

namespace {

struct Op {
  RbdFastDone done;
  void* arg;
};

void OnComplete(rbd_completion_t c, void* arg) {
  auto* op = static_cast<Op*>(arg);
  int64_t r = rbd_aio_get_return_value(c);
  rbd_aio_release(c);
  RbdFastDone done = op->done;
  void* a = op->arg;
  delete op;
  done(a, r);
}

int Submit(void* image, int kind, void* buf, uint32_t len, uint64_t offset, RbdFastDone done, void* arg) {
  if (image == nullptr) return -EBADF;
  auto* op = new (std::nothrow) Op{done, arg};
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
    return rc;
  }
  return 0;
}

const RbdApi kApi = {kRbdApiMagic, kRbdApiVersion, Submit};

}  // namespace

const RbdApi* GetRbdApi() { return &kApi; }

}  // namespace rblk
