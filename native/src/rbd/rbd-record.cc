// A record: one small RADOS object in the image's pool (and namespace) whose
// data JS reads and replaces whole, with its version in an xattr, so that
// every gateway of the image can share a piece of state with compare-and-swap
// (docs/backends.md "rbd", "Persistent reservations in the cluster"):
//  - recordWrite is one librados write op: the xattr compare
//    (rados_write_op_cmpxattr) and the new data and version apply together or
//    not at all, on the OSD that holds the object, so two gateways racing see
//    exactly one win and the other fail with ECANCELED;
//  - recordWatch registers a watch (rados_aio_watch2); a notify arrives as an
//    event whose result is a sequence number, and the notifier's
//    rados_aio_notify completes only once every watcher has called
//    recordAck() with it, or the timeout has passed (then ETIMEDOUT);
//  - a broken watch (rados_watcherrcb_t) arrives as an event too, since the
//    watcher may have missed notifies and must read the record again.
// Completions travel like the image's own (rbd-image.cc): queued by librados's
// threads, delivered on the loop. Nothing here knows what the record holds.
#include <rados/librados.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "args.h"
#include "errors.h"
#include "rbd-image.h"

namespace rblk {

struct RadosOp {
  std::shared_ptr<RbdQueue> queue;
  uint32_t token;
  rados_write_op_t write_op = nullptr;
  char* reply = nullptr;  // rados_aio_notify's reply buffer
  size_t reply_length = 0;
};

namespace {

constexpr const char* kVersionXattr = "rblk.version";

void OnRadosComplete(rados_completion_t c, void* arg) {
  auto* op = static_cast<RadosOp*>(arg);
  int64_t r = rados_aio_get_return_value(c);
  rados_aio_release(c);
  if (op->write_op != nullptr) rados_release_write_op(op->write_op);
  if (op->reply != nullptr) rados_buffer_free(op->reply);
  op->queue->Push({op->token, r, 0});
  delete op;
}

void OnNotify(void* arg, uint64_t notify_id, uint64_t handle, uint64_t, void*, size_t) {
  auto* q = static_cast<RbdQueue*>(arg);
  uint32_t seq;
  {
    std::lock_guard<std::mutex> g(q->lock);
    seq = ++q->next_notify;
    q->notifies[seq] = {notify_id, handle};
  }
  q->Push({kRecordNotifyToken, seq, 0});
}

void OnWatchError(void* arg, uint64_t, int err) {
  static_cast<RbdQueue*>(arg)->Push({kRecordErrorToken, err < 0 ? err : -err, 0});
}

}  // namespace

std::string ArgString(Napi::Env env, const Napi::Value& v, const char* op, const char* what) {
  if (!v.IsString()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, op, std::string(what) + " must be a string");
  std::string s = v.As<Napi::String>().Utf8Value();
  if (s.empty() || s.find('\0') != std::string::npos)
    throw MakeUsageError(env, "ERR_INVALID_ARG_VALUE", EINVAL, op, std::string(what) + " must be a non-empty string without NUL");
  return s;
}

rados_completion_t RbdImage::NewRadosCompletion(Napi::Env env, const char* op, uint32_t token, RadosOp** out) {
  if (ioctx_ == nullptr || busy_ || closed_) throw MakeUsageError(env, "ERR_INVALID_STATE", EBADF, op, "the image is not open");
  auto* arg = new RadosOp{queue_, token};
  *out = arg;
  rados_completion_t c = nullptr;
  int rc = rados_aio_create_completion2(arg, OnRadosComplete, &c);
  if (rc < 0) {
    delete arg;
    throw MakeError(env, -rc, op, false);
  }
  return c;
}

// A submission librados refused never calls back: release it here and throw.
void RbdImage::SubmittedRados(Napi::Env env, int rc, const char* op, rados_completion_t c, RadosOp* arg) {
  if (rc < 0) {
    if (arg->write_op != nullptr) rados_release_write_op(arg->write_op);
    delete arg;
    rados_aio_release(c);
    throw MakeError(env, -rc, op, false);
  }
  Started();
}

// recordRead(oid, buffer, token): the object's data, up to buffer's length;
// the result is the bytes read, ENOENT when there is no such object.
Napi::Value RbdImage::RecordRead(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* op = "rados_aio_read";
  std::string oid = ArgString(env, info[0], op, "oid");
  Napi::Uint8Array buf = ArgBytes(env, info[1], op);
  RadosOp* arg = nullptr;
  rados_completion_t c = NewRadosCompletion(env, op, ToU32(env, info[2], op, "token"), &arg);
  int rc = rados_aio_read(ioctx_, oid.c_str(), c, reinterpret_cast<char*>(buf.Data()), buf.ByteLength(), 0);
  SubmittedRados(env, rc, op, c, arg);
  return env.Undefined();
}

// recordWrite(oid, expected, version, data, token): replaces the data and the
// version xattr if the xattr equals `expected`, atomically. `expected` null
// creates the object and fails with EEXIST when it exists. A version that
// differs fails with ECANCELED, a missing object with ENOENT.
Napi::Value RbdImage::RecordWrite(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* op = "rados_aio_write_op_operate";
  std::string oid = ArgString(env, info[0], op, "oid");
  bool create = info[1].IsNull();
  std::string expected = create ? std::string() : ArgString(env, info[1], op, "expected version");
  std::string version = ArgString(env, info[2], op, "version");
  Napi::Uint8Array data = ArgBytes(env, info[3], op);
  RadosOp* arg = nullptr;
  rados_completion_t c = NewRadosCompletion(env, op, ToU32(env, info[4], op, "token"), &arg);
  rados_write_op_t w = rados_create_write_op();
  arg->write_op = w;
  if (create) {
    rados_write_op_create(w, LIBRADOS_CREATE_EXCLUSIVE, nullptr);
  } else {
    // Also fails the op with ENOENT when the object is gone (say `rados rm`).
    rados_write_op_assert_exists(w);
    rados_write_op_cmpxattr(w, kVersionXattr, LIBRADOS_CMPXATTR_OP_EQ, expected.data(), expected.size());
  }
  rados_write_op_write_full(w, reinterpret_cast<const char*>(data.Data()), data.ByteLength());
  rados_write_op_setxattr(w, kVersionXattr, version.data(), version.size());
  int rc = rados_aio_write_op_operate(w, ioctx_, c, oid.c_str(), nullptr, 0);
  SubmittedRados(env, rc, op, c, arg);
  return env.Undefined();
}

// recordWatch(oid, timeoutSeconds, token): one watch per image. librados
// re-establishes it across OSD moves by itself; when it cannot, the error event.
Napi::Value RbdImage::RecordWatch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* op = "rados_aio_watch2";
  std::string oid = ArgString(env, info[0], op, "oid");
  uint32_t timeout = ToU32(env, info[1], op, "timeoutSeconds");
  if (record_watching_) throw MakeUsageError(env, "ERR_INVALID_STATE", EBUSY, op, "a record is already watched; unwatch it first");
  RadosOp* arg = nullptr;
  rados_completion_t c = NewRadosCompletion(env, op, ToU32(env, info[2], op, "token"), &arg);
  uint64_t handle = 0;
  int rc = rados_aio_watch2(ioctx_, oid.c_str(), c, &handle, OnNotify, OnWatchError, timeout, queue_.get());
  SubmittedRados(env, rc, op, c, arg);
  // The handle is the watch's from submission on. A watch that then fails is
  // cancelled by librados itself (JS calls recordForget()); one that worked and
  // broke later stays registered until recordUnwatch().
  record_oid_ = oid;
  record_handle_ = handle;
  record_watching_ = true;
  return env.Undefined();
}

// recordUnwatch(token): ends the watch; completes at once when there is none.
Napi::Value RbdImage::RecordUnwatch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* op = "rados_aio_unwatch";
  RadosOp* arg = nullptr;
  rados_completion_t c = NewRadosCompletion(env, op, ToU32(env, info[0], op, "token"), &arg);
  if (!record_watching_) {
    rados_aio_release(c);
    Started();
    arg->queue->Push({arg->token, 0, 0});
    delete arg;
    return env.Undefined();
  }
  record_watching_ = false;
  int rc = rados_aio_unwatch(ioctx_, record_handle_, c);
  SubmittedRados(env, rc, op, c, arg);
  return env.Undefined();
}

// recordForget(): the watch failed to register; librados has cancelled it, so
// unwatching it would touch a freed watch.
Napi::Value RbdImage::RecordForget(const Napi::CallbackInfo& info) {
  record_watching_ = false;
  return info.Env().Undefined();
}

// recordNotify(oid, timeoutMs, token): completes when every watcher acked, or
// with ETIMEDOUT once timeoutMs passed with some watcher silent.
Napi::Value RbdImage::RecordNotify(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* op = "rados_aio_notify";
  std::string oid = ArgString(env, info[0], op, "oid");
  uint32_t timeout_ms = ToU32(env, info[1], op, "timeoutMs");
  RadosOp* arg = nullptr;
  rados_completion_t c = NewRadosCompletion(env, op, ToU32(env, info[2], op, "token"), &arg);
  int rc = rados_aio_notify(ioctx_, oid.c_str(), c, nullptr, 0, timeout_ms, &arg->reply, &arg->reply_length);
  SubmittedRados(env, rc, op, c, arg);
  return env.Undefined();
}

// recordAck(seq): acknowledges the notify of that event; librados sends it
// without waiting. An unknown sequence number (acked already) is a no-op.
Napi::Value RbdImage::RecordAck(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* op = "rados_notify_ack";
  uint32_t seq = ToU32(env, info[0], op, "seq");
  std::pair<uint64_t, uint64_t> n;
  {
    std::lock_guard<std::mutex> g(queue_->lock);
    auto it = queue_->notifies.find(seq);
    if (it == queue_->notifies.end()) return env.Undefined();
    n = it->second;
    queue_->notifies.erase(it);
  }
  if (ioctx_ == nullptr || closed_ || !record_watching_) return env.Undefined();
  int rc = rados_notify_ack(ioctx_, record_oid_.c_str(), n.first, n.second, nullptr, 0);
  if (rc < 0) throw MakeError(env, -rc, op, false);
  return env.Undefined();
}

// The destructor's last resort, like the image's own (rbd-image.cc).
void RbdImage::UnwatchRecordNow() {
  if (!record_watching_ || ioctx_ == nullptr) return;
  record_watching_ = false;
  rados_unwatch2(ioctx_, record_handle_);
  rados_watch_flush(cluster_);
}

}  // namespace rblk
