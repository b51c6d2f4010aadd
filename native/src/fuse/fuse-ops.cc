// The low-level FUSE operations of the one-file filesystem. Everything about
// metadata is answered here; data goes to JS through FuseSession::Forward.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "fuse-session.h"

namespace rblk {

namespace {

FuseSession* SessionOf(fuse_req_t req) { return static_cast<FuseSession*>(fuse_req_userdata(req)); }

// Fills st for inode ino; false when there is no such inode.
bool FillStat(const FuseFileConfig& c, fuse_ino_t ino, struct stat* st) {
  std::memset(st, 0, sizeof(*st));
  st->st_uid = c.uid;
  st->st_gid = c.gid;
  st->st_atim = c.created;
  st->st_mtim = c.created;
  st->st_ctim = c.created;
  st->st_ino = ino;
  if (ino == kRootIno) {
    st->st_mode = S_IFDIR | (c.read_only ? 0555 : 0755);
    st->st_nlink = 2;
    st->st_blksize = c.block_size;
    return true;
  }
  if (ino == kFileIno) {
    // The mode carries read-only so that ls, test -w and tools that check
    // access() see it; writes are refused again in open() and by the ro mount.
    st->st_mode = S_IFREG | (c.read_only ? 0444 : 0644);
    st->st_nlink = 1;
    st->st_size = static_cast<off_t>(c.size);
    st->st_blksize = c.block_size;
    st->st_blocks = static_cast<blkcnt_t>(c.size / 512);
    return true;
  }
  return false;
}

void OpInit(void* userdata, fuse_conn_info* conn) {
  // O_TRUNC must arrive as a setattr we can refuse, not as an open flag the
  // kernel then applies to its idea of the size. Splice and writeback caching
  // stay off: every write reaches the device before write(2) returns.
  conn->want &= ~(FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
                  FUSE_CAP_WRITEBACK_CACHE);
  // Let a direct-I/O loop device keep several requests in flight.
  if (conn->capable & FUSE_CAP_ASYNC_DIO) conn->want |= FUSE_CAP_ASYNC_DIO;
}

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  const FuseFileConfig& c = SessionOf(req)->config();
  if (parent != kRootIno || c.file_name != name) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_entry_param e{};
  e.ino = kFileIno;
  e.generation = 1;
  e.attr_timeout = c.timeout;
  e.entry_timeout = c.timeout;
  FillStat(c, kFileIno, &e.attr);
  fuse_reply_entry(req, &e);
}

void OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  const FuseFileConfig& c = SessionOf(req)->config();
  struct stat st;
  if (!FillStat(c, ino, &st)) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_reply_attr(req, &st, c.timeout);
}

// A volume has a fixed size: a truncate to another size (including the one
// open(O_TRUNC) asks for) fails with EPERM, as ownership and mode changes do.
// Time updates (touch) succeed and change nothing.
void OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  const FuseFileConfig& c = SessionOf(req)->config();
  struct stat st;
  if (!FillStat(c, ino, &st)) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  if (to_set & FUSE_SET_ATTR_SIZE) {
    if (ino != kFileIno) {
      fuse_reply_err(req, EISDIR);
      return;
    }
    if (c.read_only) {
      fuse_reply_err(req, EROFS);
      return;
    }
    if (static_cast<uint64_t>(attr->st_size) != c.size) {
      fuse_reply_err(req, EPERM);
      return;
    }
  }
  fuse_reply_attr(req, &st, c.timeout);
}

void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  const FuseFileConfig& c = SessionOf(req)->config();
  if (ino == kRootIno) {
    fuse_reply_err(req, EISDIR);
    return;
  }
  if (ino != kFileIno) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  if (c.read_only && (fi->flags & O_ACCMODE) != O_RDONLY) {
    fuse_reply_err(req, EROFS);
    return;
  }
  // direct_io: the kernel keeps no page cache for this file, so every read
  // and write is a request here, a loop device on top caches once (in its own
  // page cache), and nothing is stale if another initiator writes the volume.
  fi->direct_io = 1;
  fi->keep_cache = 0;
  // No FLUSH on close (FOPEN_NOFLUSH, Linux 5.15): the one that matters is
  // the close-on-exec in a child this process forks. libuv's spawn blocks the
  // JS thread until the child has exec'd, so a FLUSH from that exec would
  // wait for the very thread that serves it.
  fi->noflush = 1;
  fi->fh = 0;
  fuse_reply_open(req, fi);
}

void OpRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info*) {
  SessionOf(req)->Forward(req, "read", static_cast<uint64_t>(off), size, 0, nullptr);
}

void OpWrite(fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  if (SessionOf(req)->config().read_only) {
    fuse_reply_err(req, EROFS);
    return;
  }
  // fi->flags carries O_DSYNC / O_SYNC of the file or of the single write
  // (RWF_DSYNC): JS turns that into a FUA write.
  SessionOf(req)->Forward(req, "write", static_cast<uint64_t>(off), size, fi->flags, buf);
}

// flush runs on close(2) where the kernel ignores noflush. Writes are already on the device when they
// complete (no writeback cache), so there is nothing to push; durability is
// fsync's job, as on a local disk.
void OpFlush(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void OpRelease(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void OpFsync(fuse_req_t req, fuse_ino_t, int datasync, fuse_file_info*) {
  SessionOf(req)->Forward(req, "fsync", 0, 0, datasync, nullptr);
}

void OpFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length, fuse_file_info*) {
  if (ino != kFileIno) {
    fuse_reply_err(req, ENODEV);
    return;
  }
  if (SessionOf(req)->config().read_only) {
    fuse_reply_err(req, EROFS);
    return;
  }
  SessionOf(req)->Forward(req, "fallocate", static_cast<uint64_t>(offset), static_cast<uint64_t>(length), mode, nullptr);
}

void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  const FuseFileConfig& c = SessionOf(req)->config();
  if (ino != kRootIno) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  struct Entry {
    const char* name;
    fuse_ino_t ino;
  };
  const Entry entries[] = {{".", kRootIno}, {"..", kRootIno}, {c.file_name.c_str(), kFileIno}};
  std::vector<char> out(size);
  size_t used = 0;
  // off is the index of the next entry: each entry's own "next offset" is i + 1.
  for (size_t i = static_cast<size_t>(std::max<off_t>(off, 0)); i < 3; i++) {
    struct stat st{};
    st.st_ino = entries[i].ino;
    st.st_mode = entries[i].ino == kRootIno ? S_IFDIR : S_IFREG;
    size_t need = fuse_add_direntry(req, out.data() + used, size - used, entries[i].name, &st, static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, out.data(), used);
}

void OpStatfs(fuse_req_t req, fuse_ino_t) {
  const FuseFileConfig& c = SessionOf(req)->config();
  // f_bsize is what a loop device on top takes as its discard granularity.
  struct statvfs sv{};
  sv.f_bsize = c.block_size;
  sv.f_frsize = c.block_size;
  sv.f_blocks = c.size / c.block_size;
  sv.f_files = 1;
  sv.f_namemax = 255;
  fuse_reply_statfs(req, &sv);
}

const fuse_lowlevel_ops kOps = [] {
  fuse_lowlevel_ops ops{};
  ops.init = OpInit;
  ops.lookup = OpLookup;
  ops.getattr = OpGetattr;
  ops.setattr = OpSetattr;
  ops.open = OpOpen;
  ops.read = OpRead;
  ops.write = OpWrite;
  ops.flush = OpFlush;
  ops.release = OpRelease;
  ops.fsync = OpFsync;
  ops.fallocate = OpFallocate;
  ops.readdir = OpReaddir;
  ops.statfs = OpStatfs;
  return ops;
}();

}  // namespace

const fuse_lowlevel_ops* FuseOperations() { return &kOps; }

}  // namespace rblk
