// An io_uring submission/completion ring for file and block-device I/O
// (io_uring(7); liburing). It replaces the libuv thread-pool round trip of
// fs.read/fs.write (a futex wake of a pool thread, then an eventfd write back
// to the loop) with an SQE and a CQE: O_DIRECT I/O completes from the block
// layer without any thread of ours, as SPDK's uring bdev and fio's io_uring
// engine do.
//
// An I/O on an idle ring is submitted at once; under load, those queued in one
// turn of the event loop go to the kernel in one io_uring_enter, just before
// the loop blocks (BeforeBlock). Completions are found by watching an eventfd
// registered with the ring and reach JS as one call per batch of (token,
// result) pairs, as the Endpoint's completions do. The ring knows nothing of SCSI or of the
// buffers' meaning: JS keeps each buffer referenced until its token completes.
#pragma once
#include <liburing.h>
#include <napi.h>

#include <cstdint>

#include "poller.h"

namespace rblk {

class IoRing : public Napi::ObjectWrap<IoRing> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit IoRing(const Napi::CallbackInfo& info);
  ~IoRing() override;

 private:
  Napi::Value Read(const Napi::CallbackInfo& info);
  Napi::Value Write(const Napi::CallbackInfo& info);
  Napi::Value Fsync(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value Completions(const Napi::CallbackInfo& info);
  Napi::Value Features(const Napi::CallbackInfo& info);

  io_uring_sqe* NextSqe(Napi::Env env, const char* op);
  void Queued();
  int SubmitPending();
  void Drain();
  void Teardown();

  io_uring ring_{};
  bool open_ = false;
  int event_fd_ = -1;
  unsigned entries_ = 0;
  unsigned setup_flags_ = 0;
  size_t in_flight_ = 0;  // submitted or queued, not yet completed
  size_t unsubmitted_ = 0;
  FdPoller poller_;
  BeforeBlock before_block_;
  int32_t* batch_ = nullptr;  // (token, result) pairs, backed by completions_
  Napi::Reference<Napi::Int32Array> completions_;
  Napi::FunctionReference on_completions_;
  Napi::AsyncContext* async_ = nullptr;
};

}  // namespace rblk
