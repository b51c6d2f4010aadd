// Gateways of one image fencing each other (docs/backends.md "Fencing another
// gateway"). Each gateway publishes its librados client address as an xattr of
// one RADOS object next to the image, named after its target port group; a
// gateway asked to fence a group reads that address and has the monitors
// blocklist it, as librbd does when it breaks a dead owner's exclusive lock.
// From then on the OSDs refuse every operation of that client, whether it was
// already on the wire, waiting in librbd for the exclusive lock, or not sent
// yet. The blocklist is in an OSD map epoch; rados_wait_for_latest_osdmap
// makes this client's next operations carry that epoch, and an OSD does not
// run an operation before it has the map the operation carries, so nothing the
// fenced client sends can land after them.
//
// librados has no asynchronous monitor command, so both calls run on a thread
// of their own and complete like every other operation (rbd-image.cc).
#include <rados/librados.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "args.h"
#include "errors.h"
#include "rbd-image.h"

namespace rblk {

namespace {

// An entity address as librados prints it (127.0.0.1:0/3945885646, or a
// vector [v2:...,v1:...]): anything else read from the object is refused
// rather than spliced into the monitor command's JSON.
bool PlausibleAddress(const std::string& a) {
  if (a.empty() || a.size() > 256) return false;
  for (char ch : a) {
    bool ok = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F') || std::strchr(".:/[],v", ch) != nullptr;
    if (!ok) return false;
  }
  return true;
}

}  // namespace

void RbdImage::JoinGateway() {
  if (gateway_worker_.joinable()) gateway_worker_.join();
}

RbdImage::GatewayOp RbdImage::BeginGatewayOp(const Napi::CallbackInfo& info, const char* op) {
  Napi::Env env = info.Env();
  GatewayOp g{ArgString(env, info[0], op, "oid"), ArgString(env, info[1], op, "name"), ToU32(env, info[2], op, "token")};
  if (ioctx_ == nullptr || busy_ || closed_) throw MakeUsageError(env, "ERR_INVALID_STATE", EBADF, op, "the image is not open");
  if (gateway_busy_) throw MakeUsageError(env, "ERR_INVALID_STATE", EBUSY, op, "a gateway publish or fence is running");
  JoinGateway();
  gateway_busy_ = true;
  Started();
  return g;
}

// gatewayPublish(oid, name, token): sets xattr `name` of object `oid` to this
// client's address; gatewayResult is then the address.
Napi::Value RbdImage::GatewayPublish(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  GatewayOp g = BeginGatewayOp(info, "rados_setxattr");
  std::string oid = std::move(g.oid), name = std::move(g.name);
  uint32_t token = g.token;
  std::shared_ptr<RbdQueue> q = queue_;
  rados_t cluster = cluster_;
  rados_ioctx_t io = ioctx_;
  gateway_worker_ = std::thread([this, q, cluster, io, oid, name, token]() {
    char* addrs = nullptr;
    int rc = rados_getaddrs(cluster, &addrs);
    std::string result = "rados_getaddrs";
    if (rc >= 0) {
      std::string addr = addrs;
      rados_buffer_free(addrs);
      rc = rados_setxattr(io, oid.c_str(), name.c_str(), addr.data(), addr.size());
      result = rc < 0 ? "rados_setxattr" : addr;
    }
    gateway_result_ = result;
    gateway_busy_ = false;
    q->Push({token, rc < 0 ? rc : 0, 0});
  });
  return env.Undefined();
}

// gatewayFence(oid, name, token): blocklists the client whose address xattr
// `name` of `oid` holds, then waits for the OSD map that says so. Completes
// with 0 (gatewayResult: the address blocklisted), 1 (no address is
// published under that name: nothing to fence), 2 (the address is this
// client's own: not fenced), or -errno (gatewayResult: the step that failed,
// and the monitor's words when it refused).
Napi::Value RbdImage::GatewayFence(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  GatewayOp g = BeginGatewayOp(info, "rados_mon_command");
  std::string oid = std::move(g.oid), name = std::move(g.name);
  uint32_t token = g.token;
  std::shared_ptr<RbdQueue> q = queue_;
  rados_t cluster = cluster_;
  rados_ioctx_t io = ioctx_;
  gateway_worker_ = std::thread([this, q, cluster, io, oid, name, token]() {
    std::string result;
    int rc = 0;
    char value[257];
    int n = rados_getxattr(io, oid.c_str(), name.c_str(), value, sizeof value - 1);
    if (n == -ENOENT || n == -ENODATA) {
      rc = 1;
    } else if (n < 0) {
      rc = n;
      result = "rados_getxattr";
    } else {
      std::string addr(value, static_cast<size_t>(n));
      char* mine = nullptr;
      rc = rados_getaddrs(cluster, &mine);
      if (rc < 0) {
        result = "rados_getaddrs";
      } else {
        bool own = addr == mine;
        rados_buffer_free(mine);
        if (own) {
          rc = 2;
        } else if (!PlausibleAddress(addr)) {
          rc = -EINVAL;
          result = "rados_getxattr: the published address is not an entity address";
        } else {
          std::string cmd = "{\"prefix\":\"osd blocklist\",\"blocklistop\":\"add\",\"addr\":\"" + addr + "\"}";
          const char* cmds[1] = {cmd.c_str()};
          char *out = nullptr, *status = nullptr;
          size_t out_len = 0, status_len = 0;
          rc = rados_mon_command(cluster, cmds, 1, "", 0, &out, &out_len, &status, &status_len);
          if (rc < 0) result = "rados_mon_command osd blocklist add: " + std::string(status != nullptr ? status : "", status_len);
          if (out != nullptr) rados_buffer_free(out);
          if (status != nullptr) rados_buffer_free(status);
          if (rc >= 0) {
            rc = rados_wait_for_latest_osdmap(cluster);
            result = rc < 0 ? "rados_wait_for_latest_osdmap" : addr;
          }
        }
      }
    }
    gateway_result_ = result;
    gateway_busy_ = false;
    q->Push({token, rc, 0});
  });
  return env.Undefined();
}

Napi::Value RbdImage::GatewayResult(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), gateway_result_);
}

}  // namespace rblk
