#include "io-ring.h"

#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "args.h"
#include "errors.h"

namespace rblk {

namespace {

constexpr size_t kBatch = 256;
// Under load, queued I/O goes to the kernel in pairs rather than once per
// loop turn. A turn that reads a socket's worth of commands (32 NVMe/TCP or
// iSCSI reads, say) used to parse and queue all of them before the first
// reached the disk, so the disk sat idle for the whole parse and each batch
// then came back together. Submitting every second I/O lets the disk start
// while the rest are still being parsed. It gave +10-20% IOPS at QD32 on
// both the iSCSI and the NVMe/TCP listener, for no more CPU per read
// (docs/performance.md "Submitting io_uring reads as they are queued").
constexpr size_t kEagerSubmit = 2;

Napi::Uint8Array ArgBytes(Napi::Env env, const Napi::Value& v, const char* op) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, op, "buffer must be a Buffer or Uint8Array");
  return v.As<Napi::Uint8Array>();
}

}  // namespace

Napi::Function IoRing::Init(Napi::Env env) {
  return DefineClass(env, "IoRing",
                     {
                         InstanceMethod<&IoRing::Read>("read"),
                         InstanceMethod<&IoRing::Write>("write"),
                         InstanceMethod<&IoRing::Fsync>("fsync"),
                         InstanceMethod<&IoRing::Close>("close"),
                         InstanceAccessor<&IoRing::Completions>("completions"),
                         InstanceAccessor<&IoRing::Features>("features"),
                     });
}

// new IoRing(entries, onCompletions(count))
IoRing::IoRing(const Napi::CallbackInfo& info) : Napi::ObjectWrap<IoRing>(info) {
  Napi::Env env = info.Env();
  entries_ = ToU32(env, info[0], "io_uring_queue_init", "entries");
  if (entries_ < 1 || entries_ > 4096)
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, "io_uring_queue_init", "entries must be 1..4096");
  if (!info[1].IsFunction())
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "io_uring_queue_init", "onCompletions must be a function");

  // SINGLE_ISSUER: only the loop thread submits (kernel 6.0+); older kernels
  // refuse unknown flags with EINVAL, so fall back to none. Not COOP_TASKRUN:
  // it defers completions until the task next enters the kernel without waking
  // it, and this thread sleeps in epoll_wait on the ring fd waiting for them.
  unsigned flags[] = {IORING_SETUP_SINGLE_ISSUER, 0};
  int rc = -EINVAL;
  for (unsigned f : flags) {
    rc = io_uring_queue_init(entries_, &ring_, f);
    if (rc != -EINVAL) {
      setup_flags_ = f;
      break;
    }
  }
  if (rc < 0) throw MakeError(env, -rc, "io_uring_queue_init", false);
  open_ = true;

  uv_loop_t* loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  // An eventfd the kernel signals on every CQE (io_uring_register_eventfd),
  // the documented way to wait for a ring from an event loop.
  const char* op = nullptr;
  event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) op = "eventfd";
  else if ((rc = io_uring_register_eventfd(&ring_, event_fd_)) < 0) op = "io_uring_register_eventfd";
  else if (poller_.Start(loop, event_fd_, [this]() { Drain(); }) != 0) op = "uv_poll_start";
  else if (before_block_.Init(loop, [this]() { SubmitPending(); }) != 0) op = "uv_prepare_init";
  if (op != nullptr) {
    int err = rc < 0 ? -rc : (event_fd_ < 0 ? errno : EIO);
    Teardown();
    throw MakeError(env, err, op, false);
  }
  // An idle ring must not keep the process alive (Queued() and Drain() switch this).
  poller_.SetRef(false);

  Napi::Int32Array batch = Napi::Int32Array::New(env, kBatch * 2);
  batch_ = batch.Data();
  completions_ = Napi::Persistent(batch);
  on_completions_ = Napi::Persistent(info[1].As<Napi::Function>());
  async_ = new Napi::AsyncContext(env, "rblk:IoRing");
}

IoRing::~IoRing() {
  Teardown();
  delete async_;
}

void IoRing::Teardown() {
  poller_.Stop();
  before_block_.Close();
  if (!open_) return;
  // The kernel may still be writing into buffers of in-flight reads: wait for
  // every one before the ring (and, later, the memory) goes away.
  if (unsubmitted_ > 0) SubmitPending();
  while (in_flight_ > 0) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring_, &cqe) < 0) break;
    io_uring_cqe_seen(&ring_, cqe);
    in_flight_--;
  }
  io_uring_queue_exit(&ring_);
  if (event_fd_ >= 0) close(event_fd_);
  event_fd_ = -1;
  open_ = false;
}

io_uring_sqe* IoRing::NextSqe(Napi::Env env, const char* op) {
  if (!open_) throw MakeUsageError(env, "ERR_CLOSED", EBADF, op, "the ring is closed");
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    // SQ full: hand what is queued to the kernel now, which frees the slots.
    int rc = SubmitPending();
    if (rc < 0) throw MakeError(env, -rc, "io_uring_submit", false);
    sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) throw MakeError(env, EAGAIN, op, false);
  }
  return sqe;
}

void IoRing::Queued() {
  // The watch keeps the process alive exactly while I/O is in flight.
  if (++in_flight_ == 1) poller_.SetRef(true);
  unsubmitted_++;
  // An I/O on an idle ring goes to the kernel at once: there is nothing to
  // batch it with, and at queue depth 1 the wait for the prepare phase is
  // latency. Under load it goes in pairs (kEagerSubmit), and whatever is left
  // is submitted just before the loop next sleeps (BeforeBlock, which also
  // covers an I/O queued from inside the prepare phase, where an Endpoint's
  // last drain runs JS).
  if (in_flight_ == 1 && SubmitPending() >= 0 && unsubmitted_ == 0) return;
  if (unsubmitted_ >= kEagerSubmit && SubmitPending() >= 0 && unsubmitted_ == 0) return;
  before_block_.Arm();
}

int IoRing::SubmitPending() {
  if (!open_ || unsubmitted_ == 0) return 0;
  int rc = io_uring_submit(&ring_);
  if (rc >= 0) {
    unsubmitted_ = unsubmitted_ > static_cast<size_t>(rc) ? unsubmitted_ - rc : 0;
    if (unsubmitted_ > 0) before_block_.Arm();
    return rc;
  }
  if (rc == -EAGAIN || rc == -EBUSY || rc == -EINTR) {
    // Out of kernel resources or CQ overflow: complete what is done, try again before the next sleep.
    before_block_.Arm();
    return 0;
  }
  return rc;
}

// Hands every available CQE to JS, a batch at a time.
void IoRing::Drain() {
  if (!open_) return;
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  uint64_t ticks;
  // Clear the eventfd before looking at the CQ: a CQE posted after this read signals it again.
  while (read(event_fd_, &ticks, sizeof ticks) < 0 && errno == EINTR) {
  }
  for (;;) {
    io_uring_cqe* cqes[kBatch];
    unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, kBatch);
    if (n == 0) break;
    for (unsigned i = 0; i < n; i++) {
      batch_[2 * i] = static_cast<int32_t>(static_cast<uint32_t>(cqes[i]->user_data));
      batch_[2 * i + 1] = cqes[i]->res;
    }
    io_uring_cq_advance(&ring_, n);
    in_flight_ -= n;
    if (in_flight_ == 0) poller_.SetRef(false);
    try {
      on_completions_.MakeCallback(Value(), {Napi::Number::New(env, n)}, *async_);
    } catch (const Napi::Error& e) {
      // A throw out of JS must not unwind through libuv: report it as Node
      // reports any uncaught exception (rblkd logs it and exits 70).
      napi_fatal_exception(env, e.Value());
      return;
    }
    if (!open_) break;
  }
  // Completions handled in JS usually queue the next I/O: submit it before sleeping.
  if (unsubmitted_ > 0) before_block_.Arm();
}

// read(fd, buffer, fileOffset, token): fills all of buffer (or fewer bytes, as pread).
Napi::Value IoRing::Read(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = static_cast<int>(ToU32(env, info[0], "io_uring read", "fd"));
  Napi::Uint8Array buf = ArgBytes(env, info[1], "io_uring read");
  uint64_t offset = ToSafeInteger(env, info[2], "io_uring read", "offset");
  uint32_t token = ToU32(env, info[3], "io_uring read", "token");
  io_uring_sqe* sqe = NextSqe(env, "io_uring read");
  io_uring_prep_read(sqe, fd, buf.Data(), static_cast<unsigned>(buf.ByteLength()), offset);
  io_uring_sqe_set_data64(sqe, token);
  Queued();
  return env.Undefined();
}

// write(fd, buffer, fileOffset, token, dsync): dsync sets RWF_DSYNC, a
// per-write O_DSYNC (FUA, SBC-4 5.40) without a second descriptor.
Napi::Value IoRing::Write(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = static_cast<int>(ToU32(env, info[0], "io_uring write", "fd"));
  Napi::Uint8Array buf = ArgBytes(env, info[1], "io_uring write");
  uint64_t offset = ToSafeInteger(env, info[2], "io_uring write", "offset");
  uint32_t token = ToU32(env, info[3], "io_uring write", "token");
  bool dsync = info[4].IsBoolean() && info[4].As<Napi::Boolean>().Value();
  io_uring_sqe* sqe = NextSqe(env, "io_uring write");
  io_uring_prep_write(sqe, fd, buf.Data(), static_cast<unsigned>(buf.ByteLength()), offset);
  if (dsync) sqe->rw_flags = RWF_DSYNC;
  io_uring_sqe_set_data64(sqe, token);
  Queued();
  return env.Undefined();
}

// fsync(fd, token, datasync)
Napi::Value IoRing::Fsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = static_cast<int>(ToU32(env, info[0], "io_uring fsync", "fd"));
  uint32_t token = ToU32(env, info[1], "io_uring fsync", "token");
  bool datasync = !info[2].IsBoolean() || info[2].As<Napi::Boolean>().Value();
  io_uring_sqe* sqe = NextSqe(env, "io_uring fsync");
  io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0);
  io_uring_sqe_set_data64(sqe, token);
  Queued();
  return env.Undefined();
}

// Waits for in-flight I/O (the kernel may be using its buffers), then frees the ring.
Napi::Value IoRing::Close(const Napi::CallbackInfo& info) {
  Teardown();
  return info.Env().Undefined();
}

Napi::Value IoRing::Completions(const Napi::CallbackInfo& info) { return completions_.Value(); }

Napi::Value IoRing::Features(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("entries", Napi::Number::New(env, entries_));
  o.Set("singleIssuer", Napi::Boolean::New(env, (setup_flags_ & IORING_SETUP_SINGLE_ISSUER) != 0));
  return o;
}

}  // namespace rblk
