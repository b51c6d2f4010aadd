// One Ceph RBD image opened through librbd's asynchronous C API (librbd.h),
// for the rbd backend (target/backend/rbd/). Every operation, the connect and
// open and the close included, completes as a (token, result, offset) triple
// delivered to JS in batches, the way io-ring.cc delivers CQEs: librbd runs
// its callbacks on its own threads, so they only queue the result under a
// mutex and signal an eventfd that a uv_poll on the loop watches. Nothing
// here blocks the event loop: the connect (which waits for the monitors up to
// client_mount_timeout) and the close run on a thread of their own.
// The image knows nothing of SCSI; JS keeps each buffer referenced until its
// token completes, and this object referenced while anything is in flight.
#pragma once
#include <napi.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "poller.h"

namespace rblk {

struct RbdDone {
  uint32_t token;
  int64_t result;  // bytes or 0, or -errno
  uint64_t offset;  // COMPARE AND WRITE: the first mismatching byte, relative to the request
};

// What librbd's threads and the loop share; each in-flight operation holds it,
// so it outlives the image object if it must.
struct RbdQueue {
  std::mutex lock;
  std::vector<RbdDone> done;
  int event_fd = -1;
  void Push(const RbdDone& d);
  ~RbdQueue();
};

class RbdImage : public Napi::ObjectWrap<RbdImage> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit RbdImage(const Napi::CallbackInfo& info);
  ~RbdImage() override;

 private:
  Napi::Value Open(const Napi::CallbackInfo& info);
  Napi::Value Read(const Napi::CallbackInfo& info);
  Napi::Value Write(const Napi::CallbackInfo& info);
  Napi::Value Flush(const Napi::CallbackInfo& info);
  Napi::Value WriteZeroes(const Napi::CallbackInfo& info);
  Napi::Value WriteSame(const Napi::CallbackInfo& info);
  Napi::Value CompareAndWrite(const Napi::CallbackInfo& info);
  Napi::Value Size(const Napi::CallbackInfo& info);
  Napi::Value Id(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value Completions(const Napi::CallbackInfo& info);
  Napi::Value FailedStep(const Napi::CallbackInfo& info);

  rbd_completion_t NewCompletion(Napi::Env env, const char* op, uint32_t token, uint64_t* mismatch = nullptr);
  void Submitted(Napi::Env env, int rc, const char* op, rbd_completion_t c);
  void Started();
  void Drain();
  void JoinWorker();

  std::shared_ptr<RbdQueue> queue_;
  FdPoller poller_;
  rados_t cluster_ = nullptr;
  rados_ioctx_t ioctx_ = nullptr;
  rbd_image_t image_ = nullptr;
  uint64_t watch_handle_ = 0;
  bool watching_ = false;
  std::atomic<bool> busy_{false};  // open or close on the worker thread
  bool closed_ = false;
  std::string failed_step_;
  std::thread worker_;
  size_t in_flight_ = 0;
  double* batch_ = nullptr;  // (token, result, offset) triples, backed by completions_
  Napi::Reference<Napi::Float64Array> completions_;
  Napi::FunctionReference on_completions_;
  Napi::AsyncContext* async_ = nullptr;
};

}  // namespace rblk
