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
constexpr uint32_t kRbdApiVersion = 1;

enum RbdFastOp : int { kRbdFastRead = 0, kRbdFastWrite = 1, kRbdFastFlush = 2 };

// result: bytes (read, write) or 0 (flush), or -errno.
using RbdFastDone = void (*)(void* arg, int64_t result);

struct RbdApi {
  uint32_t magic;
  uint32_t version;
  // rbd_aio_read, rbd_aio_write or rbd_aio_flush on `image` (an rbd_image_t);
  // buf and len are ignored by a flush. 0: `done(arg, result)` will be called
  // exactly once, from a librbd thread; -errno: it was refused and never will be.
  int (*submit)(void* image, int op, void* buf, uint32_t len, uint64_t offset, RbdFastDone done, void* arg);
};

}  // namespace rblk
