// How the core addon (rblk_native.node) reaches librbd without linking it:
// rblk_rbd.node hands it this table of plain C functions, wrapped in a napi
// External (`rbdAddon().fastRbdApi()`, passed on by JS in a LUN's eligibility
// record together with the image's handle, RbdImage.fastHandle()), as
// rblk_uring does with uring-c-api.h. The core stays loadable on a host
// without Ceph (docs/architecture.md "Loading the addon"). librbd calls `done`
// on one of its own threads: the caller must only queue the result there
// (fast-rbd.h). The table is versioned: a core that finds another magic or
// version refuses it rather than call through it.
#pragma once
#include <cstdint>

namespace rblk {

constexpr uint32_t kRbdApiMagic = 0x72626c72;  // "rblr"
// 2: `image` is rblk_rbd's RbdFastImage (rbd-image.h), no longer a bare rbd_image_t.
constexpr uint32_t kRbdApiVersion = 2;

enum RbdFastOp : int { kRbdFastRead = 0, kRbdFastWrite = 1, kRbdFastFlush = 2 };

// result: bytes (read, write) or 0 (flush), or -errno.
using RbdFastDone = void (*)(void* arg, int64_t result);

struct RbdApi {
  uint32_t magic;
  uint32_t version;
  // rbd_aio_read, rbd_aio_write or rbd_aio_flush on `image` (the opaque handle
  // of RbdImage.fastHandle()); buf and len are ignored by a flush. 0:
  // `done(arg, result)` will be called exactly once, from a librbd thread;
  // -errno: it was refused and never will be. A result or refusal of
  // EBLOCKLISTED (ESHUTDOWN) is also told to the image's owner in JS, once
  // (the backend fences itself: docs/backends.md "Several gateways and stale
  // writes"), whatever becomes of the command that saw it.
  int (*submit)(void* image, int op, void* buf, uint32_t len, uint64_t offset, RbdFastDone done, void* arg);
};

}  // namespace rblk
