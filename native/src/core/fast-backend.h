// The fast path's backends (docs/target.md "Fast path", docs/architecture.md
// "Adding a part"): where a natively served READ or WRITE reads or writes its
// volume. Each kind is one file (fast-uring.cc: files and block devices
// through io_uring; fast-rbd.cc: Ceph RBD images through librbd) and one
// entry in kFastBackends (fast-backends.cc), as nvmet's per-namespace execute
// functions and SPDK's bdev module table are. The fast path itself
// (fast-path.cc) knows the kinds only through this interface.
//
// A connection's fast path opens one instance of a kind: at its own start
// for an `eager` kind (io_uring: if it cannot open, the connection has no
// fast path), else with the first LUN of that kind (setLun). Each instance
// has one fd that is readable when it has completions, watched where the
// fast path's data path runs: an FdPoller on the JS loop, or the
// connection's reactor (reactor.h), which calls Reap.
//
// Threads: as the fast path's data path (fast-path.h "Threads"): every call
// is under the connection's lock, on the JS thread or the reactor's. Watch
// and Unwatch run on the JS thread.
#pragma once
#include <napi.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "uring-c-api.h"

namespace rblk {

struct Memory;

// One command's backend I/O.
struct FastIo {
  uint32_t slot;  // handed back with the result
  bool write;
  bool dsync;  // a write that must be durable when it completes (FUA, WCE 0)
  void* buf;
  uint32_t length;
  uint64_t offset;  // bytes
};

// A LUN's handle in its backend, as setLun's record gave it (fast-path.cc
// SetLun): a file's fd, or the backend's own table and handle.
struct FastVolume {
  int fd = -1;
  const void* api = nullptr;
  void* handle = nullptr;
};

// What a backend instance is opened with.
struct FastBackendEnv {
  uv_loop_t* loop;           // the JS thread's
  bool reactor;              // the data path may move to a reactor thread
  bool watch;                // watch the fd on the loop now (false: a reactor already serves the connection)
  uint32_t slots;            // the most commands in flight at once
  const UringApi* uring;     // rblk_uring's table (the fast path's own argument)
  // Each I/O's result: bytes, or -errno (a dsync write's once it is durable).
  std::function<void(uint32_t slot, int64_t result)> on_done;
  // The loop's watch found the fd readable: the fast path takes its lock and
  // calls Reap (a reactor calls the fast path itself).
  std::function<void()> on_ready;
};

class FastBackend {
 public:
  virtual ~FastBackend() = default;
  // Queues one I/O: 0, -EBUSY (no room now: the fast path queues it again
  // after its next drain), or -errno (the command goes to JS).
  virtual int Queue(const FastVolume& volume, const FastIo& io) = 0;
  // At the end of a drain: submits what Queue gathered, and hands on what
  // finished inside that submission (how many: answered in the same wake-up).
  virtual unsigned Submit() { return 0; }
  // Readable when Reap has completions to hand on; -1 when there is none.
  virtual int event_fd() const = 0;
  // Hands each completion to on_done; left early if on_done abandoned it.
  virtual void Reap() = 0;
  virtual void Unwatch() = 0;
  virtual void Watch(uv_loop_t* loop) = 0;
  virtual size_t in_flight() const = 0;
  // The fast path is going: what is still in flight lives on, holding
  // `pages` (retained by the caller for it, or null) until it ends, then
  // `settled` runs on the loop thread. on_done is not called again, and
  // this object is an empty shell from here on (safe to delete).
  virtual void Abandon(Memory* pages, std::function<void()> settled) = 0;
};

struct FastBackendKind {
  const char* name;
  bool eager;  // opened with the fast path (its failure: no fast path)
  // Whether setLun's record is for this kind (the first that says so wins).
  bool (*claims)(Napi::Object record);
  // Reads the record's handle; throws a usage error when it is malformed.
  FastVolume (*volume)(Napi::Env env, Napi::Object record);
  // An instance, or null with *err = errno.
  std::unique_ptr<FastBackend> (*open)(const FastBackendEnv& env, int* err, const char** op);
};

extern const FastBackendKind* const kFastBackends[];
extern const size_t kFastBackendCount;

}  // namespace rblk
