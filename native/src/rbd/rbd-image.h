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
#include <map>
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
  // Notifies on the watched record (rbd-record.cc) that JS has yet to
  // acknowledge: our sequence number -> (notify id, watch cookie). The ids are
  // 64-bit, more than a JS number holds, so JS only sees the sequence number.
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> notifies;
  uint32_t next_notify = 0;
  // Set once an operation of this client failed with EBLOCKLISTED and JS was told (TellBlocklisted).
  std::atomic<bool> blocklist_told{false};
  void Push(const RbdDone& d);
  // From any thread: the first time only, queues kBlocklistedToken, so that JS
  // learns of the blocklist from an operation it did not submit itself (the
  // fast path's, rbd-c-api.cc; docs/backends.md "Several gateways and stale writes").
  void TellBlocklisted();
  ~RbdQueue();
};

// What RbdImage.fastHandle() points the core addon's fast path at: the open
// image, and the queue through which the C table (rbd-c-api.cc) tells JS that
// the cluster blocklisted this client. Each submission holds the queue itself,
// so a completion after the image's close touches nothing freed.
struct RbdFastImage {
  rbd_image_t image = nullptr;
  std::shared_ptr<RbdQueue> queue;
};

// Tokens of events rather than completions; no I/O's token is ever this high.
constexpr uint32_t kFirstEventToken = 0xfffffff0u;
// A notify arrived on the watched record; the result is its sequence number for recordAck().
constexpr uint32_t kRecordNotifyToken = 0xfffffffeu;
// The record's watch broke (rados_watcherrcb_t): notifies may have been missed; the result is -errno.
constexpr uint32_t kRecordErrorToken = 0xfffffffdu;
// An operation of this client that JS did not submit (the fast path's) failed with EBLOCKLISTED; once per client.
constexpr uint32_t kBlocklistedToken = 0xfffffffcu;

// A Buffer or Uint8Array argument, or a usage error.
Napi::Uint8Array ArgBytes(Napi::Env env, const Napi::Value& v, const char* op);
// A non-empty string argument without NUL, or a usage error (rbd-record.cc).
std::string ArgString(Napi::Env env, const Napi::Value& v, const char* op, const char* what);

struct RadosOp;  // rbd-record.cc

class RbdImage : public Napi::ObjectWrap<RbdImage> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit RbdImage(const Napi::CallbackInfo& info);
  ~RbdImage() override;

 private:
  // The batch Drain() is handing to JS; swapped with the queue's vector, so
  // both keep their capacity and a steady load allocates nothing per batch.
  std::vector<RbdDone> draining_;
  Napi::Value Open(const Napi::CallbackInfo& info);
  Napi::Value Read(const Napi::CallbackInfo& info);
  Napi::Value Write(const Napi::CallbackInfo& info);
  Napi::Value Flush(const Napi::CallbackInfo& info);
  Napi::Value WriteZeroes(const Napi::CallbackInfo& info);
  Napi::Value WriteSame(const Napi::CallbackInfo& info);
  Napi::Value CompareAndWrite(const Napi::CallbackInfo& info);
  Napi::Value Size(const Napi::CallbackInfo& info);
  Napi::Value Id(const Napi::CallbackInfo& info);
  Napi::Value Features(const Napi::CallbackInfo& info);
  Napi::Value FastHandle(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value Completions(const Napi::CallbackInfo& info);
  Napi::Value FailedStep(const Napi::CallbackInfo& info);
  // A small versioned object next to the image (rbd-record.cc).
  Napi::Value RecordRead(const Napi::CallbackInfo& info);
  Napi::Value RecordWrite(const Napi::CallbackInfo& info);
  Napi::Value RecordWatch(const Napi::CallbackInfo& info);
  Napi::Value RecordUnwatch(const Napi::CallbackInfo& info);
  Napi::Value RecordForget(const Napi::CallbackInfo& info);
  Napi::Value RecordNotify(const Napi::CallbackInfo& info);
  Napi::Value RecordAck(const Napi::CallbackInfo& info);
  // Gateways of one image (docs/backends.md "Fencing another gateway"): this
  // client's address published under a name in a RADOS object's xattr, and
  // another's looked up there and blocklisted (rbd-gateway.cc).
  Napi::Value GatewayPublish(const Napi::CallbackInfo& info);
  Napi::Value GatewayFence(const Napi::CallbackInfo& info);
  Napi::Value GatewayResult(const Napi::CallbackInfo& info);
  // Snapshots and clones, on the gateway thread (rbd-snap.cc).
  Napi::Value SnapOp(const Napi::CallbackInfo& info);
  void JoinGateway();
  // The start both share: (oid, name, token) read, the image open and no
  // other gateway operation running, the last one's thread joined.
  struct GatewayOp {
    std::string oid, name;
    uint32_t token;
  };
  GatewayOp BeginGatewayOp(const Napi::CallbackInfo& info, const char* op);
  rados_completion_t NewRadosCompletion(Napi::Env env, const char* op, uint32_t token, RadosOp** arg);
  void SubmittedRados(Napi::Env env, int rc, const char* op, rados_completion_t c, RadosOp* arg);
  void UnwatchRecordNow();

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
  std::string image_name_;  // as opened, for rbd_clone3
  RbdFastImage fast_;  // what fastHandle() hands out; its image is image_
  uint64_t watch_handle_ = 0;
  bool watching_ = false;
  std::string record_oid_;  // the watched record, if any
  uint64_t record_handle_ = 0;
  bool record_watching_ = false;
  std::atomic<bool> busy_{false};  // open or close on the worker thread
  bool closed_ = false;
  std::string failed_step_;
  std::thread worker_;
  // Publish and fence run here: librados has no asynchronous mon command, and
  // a blocklist must be followed by a wait for the OSD map that carries it.
  std::thread gateway_worker_;
  std::atomic<bool> gateway_busy_{false};
  std::string gateway_result_;  // written by gateway_worker_ before its Push, read after the completion
  size_t in_flight_ = 0;
  double* batch_ = nullptr;  // (token, result, offset) triples, backed by completions_
  Napi::Reference<Napi::Float64Array> completions_;
  Napi::FunctionReference on_completions_;
  Napi::AsyncContext* async_ = nullptr;
};

}  // namespace rblk
