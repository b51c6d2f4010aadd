// File and block-device calls that node:fs lacks (fallocate, SEEK_DATA/HOLE,
// BLK* ioctls, flock). They run on the libuv pool and settle a promise, except
// the ones that never wait (BLKGETSIZE64, flock with LOCK_NB); they know
// nothing of SCSI (target/backend/ maps them to the Backend interface).
#pragma once
#include <napi.h>

namespace rblk {
void InitFileOps(Napi::Env env, Napi::Object exports);
}
