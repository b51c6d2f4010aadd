#include "fuse-session.h"

#include <fcntl.h>
#include <fuse_log.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "errors.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

namespace rblk {

namespace {

// At most this many requests are taken per wake-up; uv_poll is level
// triggered, so the rest are read on the next turn of the loop.
constexpr int kMaxPerWake = 64;

// libfuse reports why a mount failed only through its log; keep the last
// line so the JS error can say it. Everything else goes to stderr as before.
bool g_capturing = false;
std::string g_last_log;

void LogToString(enum fuse_log_level level, const char* fmt, va_list ap) {
  char line[512];
  vsnprintf(line, sizeof(line), fmt, ap);
  if (g_capturing) {
    g_last_log = line;
    while (!g_last_log.empty() && (g_last_log.back() == '\n' || g_last_log.back() == ' ')) g_last_log.pop_back();
    return;
  }
  fputs(line, stderr);
}

// Mount options are comma-separated: escape what fuse_opt would split on.
std::string EscapeOption(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == ',' || ch == '\\') out.push_back('\\');
    out.push_back(ch);
  }
  return out;
}

std::string StringOpt(Napi::Object o, const char* key, const std::string& fallback) {
  Napi::Value v = o.Get(key);
  return v.IsString() ? v.As<Napi::String>().Utf8Value() : fallback;
}

double NumberOpt(Napi::Env env, Napi::Object o, const char* key) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber())
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FuseSession", std::string(key) + " must be a number");
  return v.As<Napi::Number>().DoubleValue();
}

}  // namespace

Napi::Function FuseSession::Init(Napi::Env env) {
  return DefineClass(env, "FuseSession",
                     {InstanceMethod<&FuseSession::Reply>("reply"), InstanceMethod<&FuseSession::Close>("close"),
                      InstanceAccessor<&FuseSession::Mountpoint>("mountpoint"),
                      InstanceAccessor<&FuseSession::Pending>("pending")});
}

// new FuseSession(dir, { fileName, size, blockSize, readOnly, fsName, allowOther, timeout }, onRequest)
FuseSession::FuseSession(const Napi::CallbackInfo& info) : Napi::ObjectWrap<FuseSession>(info), env_(info.Env()) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FuseSession", "dir must be a string");
  if (!info[1].IsObject()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FuseSession", "options must be an object");
  if (!info[2].IsFunction()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FuseSession", "onRequest must be a function");
  mountpoint_ = info[0].As<Napi::String>().Utf8Value();
  Napi::Object o = info[1].As<Napi::Object>();

  config_.file_name = StringOpt(o, "fileName", "");
  double size = NumberOpt(env, o, "size");
  double block = NumberOpt(env, o, "blockSize");
  double timeout = NumberOpt(env, o, "timeout");
  config_.read_only = o.Get("readOnly").ToBoolean().Value();
  bool allow_other = o.Get("allowOther").ToBoolean().Value();
  std::string fs_name = StringOpt(o, "fsName", "rblk");
  if (config_.file_name.empty() || config_.file_name == "." || config_.file_name == ".." ||
      config_.file_name.find('/') != std::string::npos || config_.file_name.size() > 255)
    throw MakeUsageError(env, "ERR_INVALID_ARG_VALUE", EINVAL, "FuseSession", "fileName must be one path component");
  if (!(size >= 0 && size <= 9007199254740991.0) || !(block >= 512 && block <= 65536) || !(timeout >= 0))
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, "FuseSession", "size, blockSize or timeout out of range");
  config_.size = static_cast<uint64_t>(size);
  config_.block_size = static_cast<uint32_t>(block);
  config_.timeout = timeout;
  config_.uid = getuid();
  config_.gid = getgid();
  clock_gettime(CLOCK_REALTIME, &config_.created);

  struct stat st;
  if (stat(mountpoint_.c_str(), &st) != 0) throw MakeError(env, errno, "stat(" + mountpoint_ + ")", false);
  if (!S_ISDIR(st.st_mode)) throw MakeError(env, ENOTDIR, "stat(" + mountpoint_ + ")", false);

  // fsname shows as the source in /proc/mounts; the type is fuse.rblk.
  std::string opts = "fsname=" + EscapeOption(fs_name) + ",subtype=rblk,default_permissions";
  if (config_.read_only) opts += ",ro";
  if (allow_other) opts += ",allow_other";
  fuse_args args = FUSE_ARGS_INIT(0, nullptr);
  fuse_opt_add_arg(&args, "rblk");
  fuse_opt_add_arg(&args, "-o");
  fuse_opt_add_arg(&args, opts.c_str());

  fuse_set_log_func(LogToString);
  g_capturing = true;
  g_last_log.clear();
  se_ = fuse_session_new(&args, FuseOperations(), sizeof(fuse_lowlevel_ops), this);
  fuse_opt_free_args(&args);
  if (se_ == nullptr) {
    g_capturing = false;
    Napi::Error e = MakeError(env, EINVAL, "fuse_session_new", false);
    if (!g_last_log.empty()) e.Set("message", Napi::String::New(env, "fuse_session_new: " + g_last_log));
    throw e;
  }
  errno = 0;
  if (fuse_session_mount(se_, mountpoint_.c_str()) != 0) {
    int err = errno != 0 ? errno : EIO;
    g_capturing = false;
    fuse_session_destroy(se_);
    se_ = nullptr;
    Napi::Error e = MakeError(env, err, "fuse_session_mount(" + mountpoint_ + ")", false);
    if (!g_last_log.empty())
      e.Set("message", Napi::String::New(env, "fuse_session_mount(" + mountpoint_ + "): " + g_last_log));
    throw e;
  }
  g_capturing = false;

  int fd = fuse_session_fd(se_);
  int fl = fcntl(fd, F_GETFL);
  // Children must not inherit the device: one that outlives us would keep a
  // dead server's connection open, and the kernel would never fail its requests.
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    int err = errno;
    Teardown();
    throw MakeError(env, err, "fcntl(/dev/fuse)", false);
  }
  uv_loop_t* loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  int rc = poller_.Start(loop, fd, [this]() { OnReadable(); });
  if (rc != 0) {
    Teardown();
    throw MakeError(env, -rc, "uv_poll_start(/dev/fuse)", false);
  }
  // This thread now serves block I/O for a filesystem that may sit on top of
  // it (loop + ext4): memory reclaim must not make it wait for its own writes.
  // Needs CAP_SYS_RESOURCE; without it the risk is only under memory pressure.
  prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0);

  on_request_ = Napi::Persistent(info[2].As<Napi::Function>());
  async_ = new Napi::AsyncContext(env, "rblk:FuseSession");
  // A normal exit (or a worker's end) must not leave the mount behind.
  napi_add_env_cleanup_hook(env, &FuseSession::CleanupHook, this);
  hook_added_ = true;
  // Stay alive while mounted: the poller calls back into this object.
  Ref();
}

FuseSession::~FuseSession() { Teardown(); }

void FuseSession::CleanupHook(void* arg) {
  auto* self = static_cast<FuseSession*>(arg);
  self->hook_added_ = false;
  self->Teardown();
}

// Unmounts and frees the session. libfuse closes the device fd first (the
// kernel then fails whatever is still queued) and detaches the mount lazily,
// so this never waits on the filesystem it serves. Requests JS still owns are
// answered EIO: that frees them; the answer itself goes nowhere.
void FuseSession::Teardown() {
  if (se_ == nullptr) return;
  poller_.Stop();
  fuse_session_exit(se_);
  fuse_session_unmount(se_);
  for (auto& entry : inflight_) fuse_reply_err(entry.second, EIO);
  inflight_.clear();
  fuse_session_destroy(se_);
  se_ = nullptr;
  free(buf_.mem);
  buf_.mem = nullptr;
  if (hook_added_) {
    napi_remove_env_cleanup_hook(env_, &FuseSession::CleanupHook, this);
    hook_added_ = false;
  }
}

void FuseSession::Forward(fuse_req_t req, const char* op, uint64_t offset, uint64_t length, int flags,
                          const char* data) {
  if (collecting_ == nullptr) {
    fuse_reply_err(req, EIO);
    return;
  }
  Napi::Env env(env_);
  uint64_t id = next_id_++;
  inflight_[id] = req;
  Napi::Value buf = data != nullptr ? Napi::Buffer<char>::Copy(env, data, length).As<Napi::Value>() : env.Null();
  collecting_->push_back(FuseCall{id, op, offset, length, flags, buf});
}

void FuseSession::OnReadable() {
  if (se_ == nullptr) return;
  Napi::Env env(env_);
  Napi::HandleScope scope(env);
  std::vector<FuseCall> calls;
  int end_errno = -1;
  collecting_ = &calls;
  for (int i = 0; i < kMaxPerWake; i++) {
    int res = fuse_session_receive_buf(se_, &buf_);
    if (res == -EINTR) continue;
    if (res == -EAGAIN) break;
    if (res <= 0) {
      // 0: libfuse saw ENODEV (unmounted, or aborted through
      // /sys/fs/fuse/connections) and marked the session exited.
      end_errno = fuse_session_exited(se_) ? 0 : -res;
      break;
    }
    fuse_session_process_buf(se_, &buf_);
    if (fuse_session_exited(se_)) {
      end_errno = 0;
      break;
    }
  }
  collecting_ = nullptr;
  Deliver(calls);
  if (end_errno >= 0 && se_ != nullptr) {
    Teardown();
    try {
      on_request_.MakeCallback(Value(), {Napi::String::New(env, "end"), Napi::Number::New(env, 0), Napi::Number::New(env, 0),
                                         Napi::Number::New(env, 0), env.Null(), Napi::Number::New(env, end_errno)},
                               *async_);
    } catch (const Napi::Error& e) {
      napi_fatal_exception(env, e.Value());
    }
    Unref();
  }
}

// onRequest(op, id, offset, length, data|null, flags) for each call. A JS
// throw is a bug in the caller: report it as uncaught, and fail the calls
// that JS will now never see.
void FuseSession::Deliver(std::vector<FuseCall>& calls) {
  Napi::Env env(env_);
  for (size_t i = 0; i < calls.size(); i++) {
    const FuseCall& c = calls[i];
    if (se_ == nullptr) return;
    try {
      on_request_.MakeCallback(Value(),
                               {Napi::String::New(env, c.op), Napi::Number::New(env, static_cast<double>(c.id)),
                                Napi::Number::New(env, static_cast<double>(c.offset)),
                                Napi::Number::New(env, static_cast<double>(c.length)), c.data,
                                Napi::Number::New(env, c.flags)},
                               *async_);
    } catch (const Napi::Error& e) {
      for (size_t j = i; j < calls.size(); j++) {
        auto it = inflight_.find(calls[j].id);
        if (it == inflight_.end()) continue;
        fuse_reply_err(it->second, EIO);
        inflight_.erase(it);
      }
      napi_fatal_exception(env, e.Value());
      return;
    }
  }
}

// reply(id, errno, result): errno 0 answers with result (a Buffer for read,
// a byte count for write, null otherwise); else with -errno. Returns false
// when the request is no longer pending (the session was closed).
Napi::Value FuseSession::Reply(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber() || !info[1].IsNumber())
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FuseSession.reply", "id and errno must be numbers");
  uint64_t id = static_cast<uint64_t>(info[0].As<Napi::Number>().DoubleValue());
  int err = info[1].As<Napi::Number>().Int32Value();
  auto it = inflight_.find(id);
  if (it == inflight_.end()) return Napi::Boolean::New(env, false);
  fuse_req_t req = it->second;
  inflight_.erase(it);
  if (err < 0 || err >= 4096) err = EIO;
  if (err != 0) {
    fuse_reply_err(req, err);
  } else if (info[2].IsBuffer()) {
    auto b = info[2].As<Napi::Buffer<char>>();
    fuse_reply_buf(req, b.Data(), b.Length());
  } else if (info[2].IsNumber()) {
    fuse_reply_write(req, static_cast<size_t>(info[2].As<Napi::Number>().DoubleValue()));
  } else {
    fuse_reply_err(req, 0);
  }
  return Napi::Boolean::New(env, true);
}

Napi::Value FuseSession::Close(const Napi::CallbackInfo& info) {
  if (se_ == nullptr) return info.Env().Undefined();
  Teardown();
  Unref();
  return info.Env().Undefined();
}

Napi::Value FuseSession::Mountpoint(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), mountpoint_);
}

Napi::Value FuseSession::Pending(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(inflight_.size()));
}

void InitFuse(Napi::Env env, Napi::Object exports) { exports.Set("FuseSession", FuseSession::Init(env)); }

}  // namespace rblk
