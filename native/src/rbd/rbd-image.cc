#include "rbd-image.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "args.h"
#include "errors.h"

namespace rblk {

namespace {

constexpr size_t kBatch = 256;
// The token of an image-changed notice (rbd_update_watch): never an I/O's.
constexpr uint32_t kWatchToken = 0xffffffffu;

struct RbdOp {
  std::shared_ptr<RbdQueue> queue;
  uint32_t token;
  uint64_t mismatch = 0;
};

void OnComplete(rbd_completion_t c, void* arg) {
  auto* op = static_cast<RbdOp*>(arg);
  int64_t r = rbd_aio_get_return_value(c);
  rbd_aio_release(c);
  op->queue->Push({op->token, r, op->mismatch});
  delete op;
}

void OnUpdate(void* arg) { static_cast<RbdQueue*>(arg)->Push({kWatchToken, 0, 0}); }

std::string OptString(Napi::Object o, const char* key) {
  Napi::Value v = o.Get(key);
  return v.IsString() ? v.As<Napi::String>().Utf8Value() : std::string();
}

}  // namespace

Napi::Uint8Array ArgBytes(Napi::Env env, const Napi::Value& v, const char* op) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, op, "buffer must be a Buffer or Uint8Array");
  return v.As<Napi::Uint8Array>();
}

void RbdQueue::Push(const RbdDone& d) {
  bool was_empty;
  {
    std::lock_guard<std::mutex> g(lock);
    was_empty = done.empty();
    done.push_back(d);
  }
  // One wake per batch: the loop swaps the whole vector out when it runs.
  if (was_empty) {
    uint64_t one = 1;
    while (write(event_fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }
}

void RbdQueue::TellBlocklisted() {
  if (!blocklist_told.exchange(true)) Push({kBlocklistedToken, -ESHUTDOWN, 0});
}

RbdQueue::~RbdQueue() {
  if (event_fd >= 0) close(event_fd);
}

Napi::Function RbdImage::Init(Napi::Env env) {
  return DefineClass(env, "RbdImage",
                     {
                         InstanceMethod<&RbdImage::Open>("open"),
                         InstanceMethod<&RbdImage::Read>("read"),
                         InstanceMethod<&RbdImage::Write>("write"),
                         InstanceMethod<&RbdImage::Flush>("flush"),
                         InstanceMethod<&RbdImage::WriteZeroes>("writeZeroes"),
                         InstanceMethod<&RbdImage::WriteSame>("writeSame"),
                         InstanceMethod<&RbdImage::CompareAndWrite>("compareAndWrite"),
                         InstanceMethod<&RbdImage::Size>("size"),
                         InstanceMethod<&RbdImage::Id>("id"),
                         InstanceMethod<&RbdImage::Features>("features"),
                         InstanceMethod<&RbdImage::FastHandle>("fastHandle"),
                         InstanceMethod<&RbdImage::Close>("close"),
                         InstanceAccessor<&RbdImage::Completions>("completions"),
                         InstanceAccessor<&RbdImage::FailedStep>("failedStep"),
                         InstanceMethod<&RbdImage::RecordRead>("recordRead"),
                         InstanceMethod<&RbdImage::RecordWrite>("recordWrite"),
                         InstanceMethod<&RbdImage::RecordWatch>("recordWatch"),
                         InstanceMethod<&RbdImage::RecordUnwatch>("recordUnwatch"),
                         InstanceMethod<&RbdImage::RecordForget>("recordForget"),
                         InstanceMethod<&RbdImage::RecordNotify>("recordNotify"),
                         InstanceMethod<&RbdImage::RecordAck>("recordAck"),
                         InstanceMethod<&RbdImage::GatewayPublish>("gatewayPublish"),
                         InstanceMethod<&RbdImage::GatewayFence>("gatewayFence"),
                         InstanceMethod<&RbdImage::SnapOp>("snapOp"),
                         InstanceAccessor<&RbdImage::GatewayResult>("gatewayResult"),
                         StaticValue("WATCH_TOKEN", Napi::Number::New(env, kWatchToken)),
                         StaticValue("RECORD_NOTIFY_TOKEN", Napi::Number::New(env, kRecordNotifyToken)),
                         StaticValue("RECORD_ERROR_TOKEN", Napi::Number::New(env, kRecordErrorToken)),
                         StaticValue("BLOCKLISTED_TOKEN", Napi::Number::New(env, kBlocklistedToken)),
                     });
}

// new RbdImage(onCompletions(count))
RbdImage::RbdImage(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RbdImage>(info) {
  Napi::Env env = info.Env();
  if (!info[0].IsFunction())
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "rbd", "onCompletions must be a function");
  queue_ = std::make_shared<RbdQueue>();
  queue_->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (queue_->event_fd < 0) throw MakeError(env, errno, "eventfd", false);
  uv_loop_t* loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  int rc = poller_.Start(loop, queue_->event_fd, [this]() { Drain(); });
  if (rc != 0) throw MakeError(env, -rc, "uv_poll_start", false);
  // Idle, the image must not keep the process alive (Started() and Drain() switch this).
  poller_.SetRef(false);
  Napi::Float64Array batch = Napi::Float64Array::New(env, kBatch * 3);
  batch_ = batch.Data();
  completions_ = Napi::Persistent(batch);
  on_completions_ = Napi::Persistent(info[0].As<Napi::Function>());
  async_ = new Napi::AsyncContext(env, "rblk:RbdImage");
}

RbdImage::~RbdImage() {
  // JS closes an image before dropping it; this is the last resort of a
  // process that exits with an image open (the cluster sees the client go).
  JoinWorker();
  JoinGateway();
  poller_.Stop();
  UnwatchRecordNow();
  if (watching_) rbd_update_unwatch(image_, watch_handle_);
  if (image_ != nullptr) rbd_close(image_);
  if (ioctx_ != nullptr) rados_ioctx_destroy(ioctx_);
  if (cluster_ != nullptr) rados_shutdown(cluster_);
  delete async_;
}

void RbdImage::JoinWorker() {
  if (worker_.joinable()) worker_.join();
}

void RbdImage::Started() {
  if (in_flight_++ == 0) {
    poller_.SetRef(true);
    Ref();  // JS may drop its last reference with I/O in flight
  }
}

// open({pool, image, namespace, conf, clientId, keyring, timeoutSeconds, readOnly}, token)
Napi::Value RbdImage::Open(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsObject()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "rbd open", "options must be an object");
  Napi::Object o = info[0].As<Napi::Object>();
  uint32_t token = ToU32(env, info[1], "rbd open", "token");
  if (closed_ || cluster_ != nullptr || busy_) throw MakeUsageError(env, "ERR_INVALID_STATE", EBADF, "rbd open", "the image is already open");
  std::string pool = OptString(o, "pool"), image = OptString(o, "image"), ns = OptString(o, "namespace");
  // A snapshot of the image (docs/operations.md "Snapshots and clones"): read-only, as librbd opens it.
  std::string snap = OptString(o, "snapshot");
  std::string conf = OptString(o, "conf"), client = OptString(o, "clientId"), keyring = OptString(o, "keyring");
  std::string timeout = std::to_string(ToU32(env, o.Get("timeoutSeconds"), "rbd open", "timeoutSeconds"));
  bool read_only = o.Get("readOnly").ToBoolean().Value();
  if (!snap.empty() && !read_only) throw MakeUsageError(env, "ERR_INVALID_ARG_VALUE", EINVAL, "rbd open", "a snapshot opens read-only");
  JoinWorker();
  image_name_ = image;
  busy_ = true;
  Started();
  std::shared_ptr<RbdQueue> q = queue_;
  worker_ = std::thread([this, q, token, pool, image, ns, snap, conf, client, keyring, timeout, read_only]() {
    rados_t cluster = nullptr;
    rados_ioctx_t io = nullptr;
    rbd_image_t img = nullptr;
    const char* step = "rados_create";
    int rc = rados_create(&cluster, client.empty() ? nullptr : client.c_str());
    if (rc >= 0) {
      step = "rados_conf_read_file";
      rc = rados_conf_read_file(cluster, conf.empty() ? nullptr : conf.c_str());
    }
    // A cluster that is away must fail operations, not hang them (docs/backends.md "rbd").
    const char* settings[][2] = {{"client_mount_timeout", timeout.c_str()},
                                 {"rados_mon_op_timeout", timeout.c_str()},
                                 {"rados_osd_op_timeout", timeout.c_str()},
                                 // No client cache: a write acknowledged by librbd is on the OSDs.
                                 {"rbd_cache", "false"},
                                 {"keyring", keyring.c_str()}};
    for (auto& s : settings) {
      if (rc < 0) break;
      if (s[1][0] == '\0') continue;
      step = "rados_conf_set";
      rc = rados_conf_set(cluster, s[0], s[1]);
    }
    if (rc >= 0) {
      step = "rados_connect";
      rc = rados_connect(cluster);
    }
    if (rc >= 0) {
      step = "rados_ioctx_create";
      rc = rados_ioctx_create(cluster, pool.c_str(), &io);
    }
    if (rc >= 0) {
      rados_ioctx_set_namespace(io, ns.empty() ? nullptr : ns.c_str());
      step = read_only ? "rbd_open_read_only" : "rbd_open";
      rc = read_only ? rbd_open_read_only(io, image.c_str(), &img, snap.empty() ? nullptr : snap.c_str()) : rbd_open(io, image.c_str(), &img, nullptr);
    }
    uint64_t handle = 0;
    if (rc >= 0) {
      step = "rbd_update_watch";
      rc = rbd_update_watch(img, &handle, OnUpdate, q.get());
    }
    if (rc < 0) {
      if (img != nullptr) rbd_close(img);
      if (io != nullptr) rados_ioctx_destroy(io);
      if (cluster != nullptr) rados_shutdown(cluster);
      failed_step_ = step;
    } else {
      cluster_ = cluster;
      ioctx_ = io;
      image_ = img;
      watch_handle_ = handle;
      watching_ = true;
    }
    busy_ = false;
    // The queue's mutex orders these stores before the loop reads them.
    q->Push({token, rc < 0 ? rc : 0, 0});
  });
  return env.Undefined();
}

rbd_completion_t RbdImage::NewCompletion(Napi::Env env, const char* op, uint32_t token, uint64_t* mismatch) {
  if (image_ == nullptr || busy_ || closed_) throw MakeUsageError(env, "ERR_INVALID_STATE", EBADF, op, "the image is not open");
  auto* arg = new RbdOp{queue_, token};
  rbd_completion_t c = nullptr;
  int rc = rbd_aio_create_completion(arg, OnComplete, &c);
  if (rc < 0) {
    delete arg;
    throw MakeError(env, -rc, op, false);
  }
  return c;
}

// A submission librbd refused never calls back: release it here and throw.
void RbdImage::Submitted(Napi::Env env, int rc, const char* op, rbd_completion_t c) {
  if (rc < 0) {
    delete static_cast<RbdOp*>(rbd_aio_get_arg(c));
    rbd_aio_release(c);
    throw MakeError(env, -rc, op, false);
  }
  Started();
}

// read(buffer, offset, token)
Napi::Value RbdImage::Read(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Uint8Array buf = ArgBytes(env, info[0], "rbd_aio_read");
  uint64_t off = ToSafeInteger(env, info[1], "rbd_aio_read", "offset");
  rbd_completion_t c = NewCompletion(env, "rbd_aio_read", ToU32(env, info[2], "rbd_aio_read", "token"));
  Submitted(env, rbd_aio_read(image_, off, buf.ByteLength(), reinterpret_cast<char*>(buf.Data()), c), "rbd_aio_read", c);
  return env.Undefined();
}

// write(buffer, offset, token)
Napi::Value RbdImage::Write(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Uint8Array buf = ArgBytes(env, info[0], "rbd_aio_write");
  uint64_t off = ToSafeInteger(env, info[1], "rbd_aio_write", "offset");
  rbd_completion_t c = NewCompletion(env, "rbd_aio_write", ToU32(env, info[2], "rbd_aio_write", "token"));
  Submitted(env, rbd_aio_write(image_, off, buf.ByteLength(), reinterpret_cast<const char*>(buf.Data()), c), "rbd_aio_write", c);
  return env.Undefined();
}

// flush(token)
Napi::Value RbdImage::Flush(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  rbd_completion_t c = NewCompletion(env, "rbd_aio_flush", ToU32(env, info[0], "rbd_aio_flush", "token"));
  Submitted(env, rbd_aio_flush(image_, c), "rbd_aio_flush", c);
  return env.Undefined();
}

// writeZeroes(offset, length, token): librbd deallocates the objects the range
// covers whole and zeroes the rest; the rbd backend's discard (docs/backends.md).
Napi::Value RbdImage::WriteZeroes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint64_t off = ToSafeInteger(env, info[0], "rbd_aio_write_zeroes", "offset");
  uint64_t len = ToSafeInteger(env, info[1], "rbd_aio_write_zeroes", "length");
  rbd_completion_t c = NewCompletion(env, "rbd_aio_write_zeroes", ToU32(env, info[2], "rbd_aio_write_zeroes", "token"));
  Submitted(env, rbd_aio_write_zeroes(image_, off, len, c, 0, 0), "rbd_aio_write_zeroes", c);
  return env.Undefined();
}

// writeSame(pattern, offset, length, token): length is a multiple of the pattern's.
Napi::Value RbdImage::WriteSame(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Uint8Array buf = ArgBytes(env, info[0], "rbd_aio_writesame");
  uint64_t off = ToSafeInteger(env, info[1], "rbd_aio_writesame", "offset");
  uint64_t len = ToSafeInteger(env, info[2], "rbd_aio_writesame", "length");
  rbd_completion_t c = NewCompletion(env, "rbd_aio_writesame", ToU32(env, info[3], "rbd_aio_writesame", "token"));
  int rc = rbd_aio_writesame(image_, off, len, reinterpret_cast<const char*>(buf.Data()), buf.ByteLength(), c, 0);
  Submitted(env, rc, "rbd_aio_writesame", c);
  return env.Undefined();
}

// compareAndWrite(compare, write, offset, token): atomic on the OSD, so across
// every client of the image (SBC-4 5.3); a miscompare completes with -EILSEQ
// and the offset of the first differing byte.
Napi::Value RbdImage::CompareAndWrite(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* op = "rbd_aio_compare_and_write";
  Napi::Uint8Array cmp = ArgBytes(env, info[0], op);
  Napi::Uint8Array buf = ArgBytes(env, info[1], op);
  if (cmp.ByteLength() != buf.ByteLength())
    throw MakeUsageError(env, "ERR_INVALID_ARG_VALUE", EINVAL, op, "compare and write buffers differ in length");
  uint64_t off = ToSafeInteger(env, info[2], op, "offset");
  rbd_completion_t c = NewCompletion(env, op, ToU32(env, info[3], op, "token"));
  auto* arg = static_cast<RbdOp*>(rbd_aio_get_arg(c));
  ssize_t rc = rbd_aio_compare_and_write(image_, off, buf.ByteLength(), reinterpret_cast<const char*>(cmp.Data()),
                                         reinterpret_cast<const char*>(buf.Data()), c, &arg->mismatch, 0);
  Submitted(env, static_cast<int>(rc), op, c);
  return env.Undefined();
}

// size(): bytes, as librbd last read the header (rbd_update_watch refreshes it).
Napi::Value RbdImage::Size(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (image_ == nullptr || busy_) throw MakeUsageError(env, "ERR_INVALID_STATE", EBADF, "rbd_get_size", "the image is not open");
  uint64_t size = 0;
  int rc = rbd_get_size(image_, &size);
  if (rc < 0) throw MakeError(env, -rc, "rbd_get_size", false);
  return Napi::Number::New(env, static_cast<double>(size));
}

// id(): "<cluster fsid>/<pool id>/<image id>", the same from every host and
// for the image's whole life (a rename keeps it): the source of VPD 83h.
Napi::Value RbdImage::Id(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (image_ == nullptr || busy_) throw MakeUsageError(env, "ERR_INVALID_STATE", EBADF, "rbd_get_id", "the image is not open");
  char id[128];
  int rc = rbd_get_id(image_, id, sizeof id);
  if (rc < 0) throw MakeError(env, -rc, "rbd_get_id", false);
  char fsid[64];
  rc = rados_cluster_fsid(cluster_, fsid, sizeof fsid);
  if (rc < 0) throw MakeError(env, -rc, "rados_cluster_fsid", false);
  std::string out = std::string(fsid) + "/" + std::to_string(rados_ioctx_get_id(ioctx_)) + "/" + id;
  return Napi::String::New(env, out);
}

// features(): the image's feature bits (rbd_get_features: RBD_FEATURE_*), as a
// number (they fit in 53 bits). Exclusive-lock is the one the gateways depend
// on (docs/backends.md "rbd", "Several gateways and stale writes").
Napi::Value RbdImage::Features(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (image_ == nullptr || busy_) throw MakeUsageError(env, "ERR_INVALID_STATE", EBADF, "rbd_get_features", "the image is not open");
  uint64_t features = 0;
  int rc = rbd_get_features(image_, &features);
  if (rc < 0) throw MakeError(env, -rc, "rbd_get_features", false);
  return Napi::Number::New(env, static_cast<double>(features));
}

// fastHandle(): the open image (an RbdFastImage: the rbd_image_t and this
// image's queue) as an External, for the core addon's fast path (rbd-c-api.h).
// Valid until close(): JS revokes the fast path and waits for its commands
// before closing (docs/target.md "Fast path").
Napi::Value RbdImage::FastHandle(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (image_ == nullptr || busy_ || closed_) throw MakeUsageError(env, "ERR_INVALID_STATE", EBADF, "rbd fastHandle", "the image is not open");
  fast_.image = image_;
  fast_.queue = queue_;
  return Napi::External<void>::New(env, static_cast<void*>(&fast_));
}

// close(token): after every I/O has completed; runs off the loop, since
// librbd's close talks to the cluster.
Napi::Value RbdImage::Close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint32_t token = ToU32(env, info[0], "rbd_close", "token");
  if (closed_ || busy_) throw MakeUsageError(env, "ERR_INVALID_STATE", EBADF, "rbd_close", "the image is closed or busy");
  closed_ = true;
  JoinWorker();
  rados_t cluster = cluster_;
  rados_ioctx_t io = ioctx_;
  rbd_image_t img = image_;
  bool watching = watching_;
  uint64_t handle = watch_handle_;
  bool record_watching = record_watching_;
  uint64_t record_handle = record_handle_;
  record_watching_ = false;
  cluster_ = nullptr;
  ioctx_ = nullptr;
  image_ = nullptr;
  watching_ = false;
  busy_ = true;
  Started();
  std::shared_ptr<RbdQueue> q = queue_;
  // A gateway publish or fence still running uses the cluster handle: it ends first.
  std::thread gateway = std::move(gateway_worker_);
  worker_ = std::thread([this, q, token, cluster, io, img, watching, handle, record_watching, record_handle, gateway = std::move(gateway)]() mutable {
    if (gateway.joinable()) gateway.join();
    int rc = 0;
    // The record's watch goes first, and its callbacks with it, before the ioctx they use.
    if (record_watching) {
      rados_unwatch2(io, record_handle);
      rados_watch_flush(cluster);
    }
    if (watching) rbd_update_unwatch(img, handle);
    if (img != nullptr) rc = rbd_close(img);
    if (io != nullptr) rados_ioctx_destroy(io);
    if (cluster != nullptr) rados_shutdown(cluster);
    busy_ = false;
    q->Push({token, rc, 0});
  });
  return env.Undefined();
}

Napi::Value RbdImage::Completions(const Napi::CallbackInfo& info) { return completions_.Value(); }

Napi::Value RbdImage::FailedStep(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), failed_step_);
}

// Hands every queued result to JS, a batch at a time.
void RbdImage::Drain() {
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  uint64_t ticks;
  // Clear the eventfd before taking the queue: a result pushed after this read signals it again.
  while (read(queue_->event_fd, &ticks, sizeof ticks) < 0 && errno == EINTR) {
  }
  std::vector<RbdDone>& done = draining_;
  done.clear();
  {
    std::lock_guard<std::mutex> g(queue_->lock);
    done.swap(queue_->done);
  }
  // Each time in_flight_ fell to zero is one Ref() of Started() to give back,
  // after the callbacks: JS may start more I/O (and Ref again) inside them.
  unsigned releases = 0;
  for (size_t at = 0; at < done.size(); at += kBatch) {
    size_t n = std::min(kBatch, done.size() - at);
    for (size_t i = 0; i < n; i++) {
      const RbdDone& d = done[at + i];
      batch_[3 * i] = d.token;
      batch_[3 * i + 1] = static_cast<double>(d.result);
      batch_[3 * i + 2] = static_cast<double>(d.offset);
      if (d.token < kFirstEventToken && --in_flight_ == 0) releases++;
    }
    try {
      on_completions_.MakeCallback(Value(), {Napi::Number::New(env, static_cast<double>(n))}, *async_);
    } catch (const Napi::Error& e) {
      // A throw out of JS must not unwind through libuv (as io-ring.cc).
      napi_fatal_exception(env, e.Value());
      break;
    }
  }
  if (in_flight_ == 0) {
    poller_.SetRef(false);
    if (!busy_) JoinWorker();
    if (!gateway_busy_) JoinGateway();
  }
  while (releases-- > 0) Unref();
}

}  // namespace rblk
