// How the core addon (rblk_native.node) reaches io_uring without linking
// liburing: rblk_uring.node hands it this table of plain C functions, wrapped
// in a napi External (`uringAddon().fastRingApi()`, passed on by JS). The core
// stays loadable on a host without liburing (docs/architecture.md "Loading the
// addon"); a host without it simply has no native fast path for file and
// block-device volumes. The table is versioned: a core that finds another
// magic or version refuses it rather than call through it.
#pragma once
#include <cstdint>

namespace rblk {

constexpr uint32_t kUringApiMagic = 0x72626c75;  // "rblu"
constexpr uint32_t kUringApiVersion = 3;

enum UringOp : int { kUringRead = 0, kUringWrite = 1, kUringFdatasync = 2 };

struct UringCompletion {
  uint64_t user_data;
  int32_t res;  // bytes, or -errno
};

struct UringApi {
  uint32_t magic;
  uint32_t version;
  // A ring of `entries` slots that signals `*event_fd` on each completion
  // (the caller watches it). Null with *err = errno on failure. With
  // single_issuer, IORING_SETUP_SINGLE_ISSUER where the kernel has it: then
  // only the opening thread may submit, so a ring a reactor thread will drive
  // (reactor.h) is opened without it.
  void* (*open)(unsigned entries, int* event_fd, int* err, bool single_issuer);
  // Queues one I/O; -EBUSY when the submission queue is full even after
  // submitting what it held. dsync sets RWF_DSYNC on a write (FUA).
  int (*queue)(void* ring, int op, int fd, void* buf, uint32_t len, uint64_t offset, bool dsync, uint64_t user_data);
  // io_uring_enter for everything queued: the count submitted, or -errno.
  int (*submit)(void* ring);
  // Clears the event fd and takes up to `max` completions.
  unsigned (*reap)(void* ring, UringCompletion* out, unsigned max);
  // Takes up to `max` completions already posted, without a system call:
  // what io_uring_enter finished inline (a buffered read the page cache
  // held). When that leaves nothing in flight, it also clears the event fd,
  // whose signal for them would only wake the loop to find nothing.
  unsigned (*peek)(void* ring, UringCompletion* out, unsigned max);
  // Waits for every I/O in flight (the kernel may be using their buffers), then frees the ring.
  void (*close)(void* ring);
};

}  // namespace rblk
