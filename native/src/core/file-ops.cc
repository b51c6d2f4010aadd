#include "file-ops.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <functional>

#include "args.h"
#include "errors.h"

namespace rblk {

namespace {

// What a pool job produced: a value, or an errno.
struct Outcome {
  int64_t value;
  int err;
};

Outcome Ok(int64_t v) { return {v, 0}; }
Outcome FromErrno() { return {0, errno}; }

// Runs fn on the pool and settles a promise with its Outcome.
class PromiseWorker : public Napi::AsyncWorker {
 public:
  PromiseWorker(Napi::Env env, const char* op, std::function<Outcome()> fn)
      : Napi::AsyncWorker(env, op), deferred_(Napi::Promise::Deferred::New(env)), op_(op), fn_(std::move(fn)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override { result_ = fn_(); }
  void OnOK() override {
    Napi::Env env = Env();
    if (result_.err != 0) {
      deferred_.Reject(MakeError(env, result_.err, op_, false).Value());
    } else {
      deferred_.Resolve(Napi::Number::New(env, static_cast<double>(result_.value)));
    }
  }

 private:
  Napi::Promise::Deferred deferred_;
  const char* op_;
  std::function<Outcome()> fn_;
  Outcome result_{0, 0};
};

int64_t ArgInt(const Napi::CallbackInfo& info, size_t i, const char* op) {
  return ToSafeInteger(info.Env(), info[i], op, "argument " + std::to_string(i));
}

Napi::Value Fallocate(const Napi::CallbackInfo& info) {
  int fd = static_cast<int>(ArgInt(info, 0, "fallocate"));
  int mode = static_cast<int>(ArgInt(info, 1, "fallocate"));
  off_t off = ArgInt(info, 2, "fallocate");
  off_t len = ArgInt(info, 3, "fallocate");
  auto* w = new PromiseWorker(info.Env(), "fallocate", [=]() -> Outcome {
    return fallocate(fd, mode, off, len) == 0 ? Ok(0) : FromErrno();
  });
  w->Queue();
  return w->Promise();
}

// lseek(SEEK_DATA/SEEK_HOLE); ENXIO (no data at or after offset) resolves -1
// so callers can tell "the rest is a hole" from a real failure.
Napi::Value Seek(const Napi::CallbackInfo& info) {
  int fd = static_cast<int>(ArgInt(info, 0, "seek"));
  off_t off = ArgInt(info, 1, "seek");
  int whence = static_cast<int>(ArgInt(info, 2, "seek"));
  if (whence != SEEK_DATA && whence != SEEK_HOLE)
    throw MakeUsageError(info.Env(), "ERR_OUT_OF_RANGE", EINVAL, "seek", "whence must be SEEK_DATA (3) or SEEK_HOLE (4)");
  auto* w = new PromiseWorker(info.Env(), "seek", [=]() -> Outcome {
    off_t r = lseek(fd, off, whence);
    if (r >= 0) return Ok(r);
    return errno == ENXIO ? Ok(-1) : FromErrno();
  });
  w->Queue();
  return w->Promise();
}

Napi::Value BlockDeviceInfo(const Napi::CallbackInfo& info) {
  int fd = static_cast<int>(ArgInt(info, 0, "blockDeviceInfo"));
  uint64_t size = 0;
  int lbs = 0;
  if (ioctl(fd, BLKGETSIZE64, &size) != 0) throw MakeError(info.Env(), errno, "ioctl(BLKGETSIZE64)", false);
  if (ioctl(fd, BLKSSZGET, &lbs) != 0) throw MakeError(info.Env(), errno, "ioctl(BLKSSZGET)", false);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("size", Napi::Number::New(info.Env(), static_cast<double>(size)));
  o.Set("logicalBlockSize", Napi::Number::New(info.Env(), lbs));
  return o;
}

Napi::Value BlockDeviceRange(const Napi::CallbackInfo& info) {
  int fd = static_cast<int>(ArgInt(info, 0, "blockDeviceRange"));
  std::string op = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
  unsigned long req;
  const char* name;
  if (op == "discard") {
    req = BLKDISCARD;
    name = "ioctl(BLKDISCARD)";
  } else if (op == "zeroout") {
    req = BLKZEROOUT;
    name = "ioctl(BLKZEROOUT)";
  } else {
    throw MakeUsageError(info.Env(), "ERR_INVALID_ARG_VALUE", EINVAL, "blockDeviceRange", "op must be 'discard' or 'zeroout'");
  }
  uint64_t off = static_cast<uint64_t>(ArgInt(info, 2, "blockDeviceRange"));
  uint64_t len = static_cast<uint64_t>(ArgInt(info, 3, "blockDeviceRange"));
  auto* w = new PromiseWorker(info.Env(), name, [=]() -> Outcome {
    uint64_t range[2] = {off, len};
    return ioctl(fd, req, range) == 0 ? Ok(0) : FromErrno();
  });
  w->Queue();
  return w->Promise();
}

// flock(LOCK_NB) on the whole store: exclusive for a volume that writes, shared
// for a read-only one (docs/backends.md "One daemon per store"). Synchronous,
// because it never waits: a lock someone else holds fails at once with
// EWOULDBLOCK. The lock belongs to the open file description, so it lasts until
// that descriptor is closed, and /proc/locks names the process that took it.
Napi::Value LockStore(const Napi::CallbackInfo& info) {
  int fd = static_cast<int>(ArgInt(info, 0, "lockStore"));
  bool exclusive = info[1].IsBoolean() && info[1].As<Napi::Boolean>().Value();
  int rc;
  do {
    rc = flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) throw MakeError(info.Env(), errno, exclusive ? "flock(LOCK_EX)" : "flock(LOCK_SH)", false);
  return info.Env().Undefined();
}

}  // namespace

void InitFileOps(Napi::Env env, Napi::Object exports) {
  exports.Set("fallocate", Napi::Function::New(env, Fallocate, "fallocate"));
  exports.Set("seek", Napi::Function::New(env, Seek, "seek"));
  exports.Set("blockDeviceInfo", Napi::Function::New(env, BlockDeviceInfo, "blockDeviceInfo"));
  exports.Set("blockDeviceRange", Napi::Function::New(env, BlockDeviceRange, "blockDeviceRange"));
  exports.Set("lockStore", Napi::Function::New(env, LockStore, "lockStore"));
  Napi::Object modes = Napi::Object::New(env);
  modes.Set("KEEP_SIZE", Napi::Number::New(env, FALLOC_FL_KEEP_SIZE));
  modes.Set("PUNCH_HOLE", Napi::Number::New(env, FALLOC_FL_PUNCH_HOLE));
  modes.Set("ZERO_RANGE", Napi::Number::New(env, FALLOC_FL_ZERO_RANGE));
  exports.Set("fallocateModes", modes);
}

}  // namespace rblk
