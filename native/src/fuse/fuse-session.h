// A libfuse3 low-level session that serves one regular file (a volume) in a
// directory of its own. The /dev/fuse fd is non-blocking and watched with
// uv_poll on the JS loop: requests are received and processed on the JS
// thread, so no lock is needed and the JS thread never waits on the kernel.
// Metadata requests (lookup, getattr, readdir, statfs, open, ...) are answered
// here at once; data requests (read, write, fsync, fallocate) are handed to JS
// and answered when JS calls reply(), in any order (the low-level API allows
// replies out of order).
#pragma once
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <napi.h>
#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "poller.h"

namespace rblk {

// What the filesystem shows: a root directory (inode 1) holding one file (inode 2).
struct FuseFileConfig {
  std::string file_name;
  uint64_t size = 0;
  uint32_t block_size = 512;
  bool read_only = false;
  double timeout = 60.0;  // entry and attribute cache validity, seconds
  uid_t uid = 0;
  gid_t gid = 0;
  timespec created{};
};

constexpr fuse_ino_t kRootIno = FUSE_ROOT_ID;
constexpr fuse_ino_t kFileIno = 2;

// A request on its way to JS: collected while libfuse processes a buffer,
// delivered after it returns (JS may call reply() or close() re-entrantly).
struct FuseCall {
  uint64_t id;
  const char* op;
  uint64_t offset;
  uint64_t length;
  int flags;
  Napi::Value data;
};

class FuseSession : public Napi::ObjectWrap<FuseSession> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit FuseSession(const Napi::CallbackInfo& info);
  ~FuseSession() override;

  const FuseFileConfig& config() const { return config_; }
  // Called from the low-level ops (fuse-ops.cc) for requests JS must answer.
  void Forward(fuse_req_t req, const char* op, uint64_t offset, uint64_t length, int flags, const char* data);

 private:
  Napi::Value Reply(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value Mountpoint(const Napi::CallbackInfo& info);
  Napi::Value Pending(const Napi::CallbackInfo& info);

  void OnReadable();
  void Deliver(std::vector<FuseCall>& calls);
  void Teardown();
  static void CleanupHook(void* arg);

  FuseFileConfig config_;
  std::string mountpoint_;
  fuse_session* se_ = nullptr;
  fuse_buf buf_{};
  FdPoller poller_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, fuse_req_t> inflight_;
  std::vector<FuseCall>* collecting_ = nullptr;
  napi_env env_ = nullptr;
  bool hook_added_ = false;
  Napi::FunctionReference on_request_;
  Napi::AsyncContext* async_ = nullptr;
};

// The low-level operation table (fuse-ops.cc); userdata is the FuseSession.
const fuse_lowlevel_ops* FuseOperations();

void InitFuse(Napi::Env env, Napi::Object exports);

}  // namespace rblk
