// Snapshots and clones of an rbd volume (docs/operations.md "Snapshots and
// clones"), through librbd (librbd.h: rbd_snap_create, rbd_snap_list,
// rbd_snap_get_timestamp, rbd_snap_protect, rbd_snap_unprotect,
// rbd_snap_remove, rbd_clone3, rbd_flatten). librbd has these only as blocking calls, so
// each runs on the gateway thread (rbd-gateway.cc), one at a time, and
// completes like every other operation; gatewayResult then holds the list
// (JSON) or the step that failed.
#include <rbd/librbd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "args.h"
#include "errors.h"
#include "rbd-image.h"

namespace rblk {

namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// [{"name":..,"size":..,"created":seconds}] of every snapshot, or -errno.
int ListSnaps(rbd_image_t img, std::string* out) {
  std::vector<rbd_snap_info_t> snaps(16);
  int max = static_cast<int>(snaps.size());
  int n;
  for (;;) {
    n = rbd_snap_list(img, snaps.data(), &max);
    if (n != -ERANGE) break;
    snaps.resize(static_cast<size_t>(max));
  }
  if (n < 0) return n;
  std::string json = "[";
  for (int i = 0; i < n; i++) {
    struct timespec ts = {0, 0};
    rbd_snap_get_timestamp(img, snaps[i].id, &ts);
    if (i > 0) json += ',';
    json += "{\"name\":" + JsonString(snaps[i].name) + ",\"size\":" + std::to_string(snaps[i].size) + ",\"created\":" + std::to_string(ts.tv_sec) + "}";
  }
  json += "]";
  rbd_snap_list_end(snaps.data());
  *out = json;
  return 0;
}

}  // namespace

// snapOp(op, name, token, child): op is create, remove, list, clone (of
// snapshot `name` to the new image `child` in the same pool and namespace) or
// flatten (this image, a clone: its parent's data copied in, the link to the
// parent snapshot cut, so that snapshot can be removed; `name` is unused).
// remove unprotects first; clone protects first (clone v1 needs it, v2 does
// not mind), so a snapshot with clones is refused by remove with EBUSY.
Napi::Value RbdImage::SnapOp(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string child = info.Length() > 3 && info[3].IsString() ? info[3].As<Napi::String>().Utf8Value() : std::string();
  GatewayOp g = BeginGatewayOp(info, "rbd snapshot");
  std::string op = std::move(g.oid), name = std::move(g.name), parent = image_name_;
  uint32_t token = g.token;
  std::shared_ptr<RbdQueue> q = queue_;
  rbd_image_t img = image_;
  rados_ioctx_t io = ioctx_;
  gateway_worker_ = std::thread([this, q, img, io, op, name, child, parent, token]() {
    std::string result;
    int rc = 0;
    if (op == "create") {
      rc = rbd_snap_create(img, name.c_str());
      if (rc < 0) result = "rbd_snap_create";
    } else if (op == "list") {
      rc = ListSnaps(img, &result);
      if (rc < 0) result = "rbd_snap_list";
    } else if (op == "remove") {
      int is = 0;
      rc = rbd_snap_is_protected(img, name.c_str(), &is);
      if (rc < 0) result = "rbd_snap_is_protected";
      if (rc >= 0 && is != 0) {
        rc = rbd_snap_unprotect(img, name.c_str());
        if (rc < 0) result = "rbd_snap_unprotect";
      }
      if (rc >= 0) {
        rc = rbd_snap_remove(img, name.c_str());
        if (rc < 0) result = "rbd_snap_remove";
      }
    } else if (op == "clone") {
      int is = 0;
      rc = rbd_snap_is_protected(img, name.c_str(), &is);
      if (rc < 0) result = "rbd_snap_is_protected";
      if (rc >= 0 && is == 0) {
        rc = rbd_snap_protect(img, name.c_str());
        if (rc < 0) result = "rbd_snap_protect";
      }
      if (rc >= 0) {
        rbd_image_options_t opts;
        rbd_image_options_create(&opts);
        rc = rbd_clone3(io, parent.c_str(), name.c_str(), io, child.c_str(), opts);
        rbd_image_options_destroy(opts);
        if (rc < 0) result = "rbd_clone3";
      }
    } else if (op == "flatten") {
      // Blocking, as long as copying the parent's objects takes; I/O goes on meanwhile.
      rc = rbd_flatten(img);
      if (rc < 0) result = "rbd_flatten";
    } else {
      rc = -EINVAL;
      result = "rbd snapshot: unknown operation " + op;
    }
    gateway_result_ = result;
    gateway_busy_ = false;
    q->Push({token, rc < 0 ? rc : 0, 0});
  });
  return env.Undefined();
}

}  // namespace rblk
