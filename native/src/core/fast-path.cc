// Over 600 lines: the one state machine from a receive to its answer (fast-path.h), kept
// whole so that each stage reads beside the next; its QoS side is in fast-path-qos.cc.
#include "fast-path.h"

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "addon-data.h"
#include "args.h"
#include "endpoint.h"
#include "errors.h"
#include "memory-region.h"
#include "qos-bucket.h"
#include "reactor.h"

namespace rblk {

namespace {
constexpr int kDataOut = 0;  // RDMA READ of the initiator's buffer (a WRITE's data)
constexpr int kDataIn = 1;   // RDMA WRITE into it (a READ's data)
constexpr int kRsp = 2;      // the RSP capsule
constexpr uint32_t kRspSlot = 64;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint32_t Prop(Napi::Env env, Napi::Object o, const char* name) { return ToU32(env, o.Get(name), "FastPath", name); }
bool Flag(Napi::Object o, const char* name) { return o.Get(name).ToBoolean().Value(); }
}  // namespace

Napi::Function FastPath::Init(Napi::Env env) {
  return DefineClass(env, "FastPath",
                     {InstanceMethod<&FastPath::SetLun>("setLun"), InstanceMethod<&FastPath::Revoke>("revoke"),
                      InstanceMethod<&FastPath::DropParkedJs>("dropParked"),
                      InstanceMethod<&FastPath::InFlight>("inFlight"), InstanceMethod<&FastPath::HasTag>("hasTag"),
                      InstanceMethod<&FastPath::SetCounters>("setCounters"), InstanceAccessor<&FastPath::Stats>("stats"),
                      InstanceMethod<&FastPath::TakeCounts>("takeCounts"),
                      InstanceMethod<&FastPath::Close>("close")});
}

// new FastPath(endpoint, region, uringApi, options, onFailed(tag, lun, kind, errno, length), onIdle(lun))
// options: { slots, slotSize, maxCapsule, maxTransfer, maxImmediate, ordered, credits, remoteData, trains?, reactors?, qosPark? }
// qosPark: how many commands may wait here for their QoS turn at once (default: slots; 0: none, fast-path-qos.cc).
// With reactors (a Reactors), the connection's data path moves to the least
// loaded reactor thread (reactor.h); if that fails it stays on the JS thread
// (stats.reactor says which).
FastPath::FastPath(const Napi::CallbackInfo& info) : Napi::ObjectWrap<FastPath>(info) {
  Napi::Env env = info.Env();
  endpoint_ = UnwrapAs<Endpoint>(env, info[0], &AddonData::endpoint, "Endpoint", "FastPath");
  endpoint_->CheckOpen(env, "FastPath");
  region_ = MemoryRegion::FromValue(env, info[1], "FastPath");
  if (!info[2].IsExternal()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FastPath", "uringApi must come from rblk_uring's fastRingApi()");
  uring_ = info[2].As<Napi::External<UringApi>>().Data();
  if (uring_ == nullptr || uring_->magic != kUringApiMagic || uring_->version != kUringApiVersion)
    throw MakeUsageError(env, "ERR_INVALID_ARG_VALUE", EINVAL, "FastPath", "rblk_uring's ring table is of another version");
  if (!info[3].IsObject() || !info[4].IsFunction() || !info[5].IsFunction())
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FastPath", "options, onFailed and onIdle are required");
  if (endpoint_->has_consumer()) throw MakeUsageError(env, "ERR_INVALID_STATE", EBUSY, "FastPath", "the endpoint already has a fast path or an initiator queue");
  Napi::Object o = info[3].As<Napi::Object>();
  uint32_t slots = Prop(env, o, "slots");
  slot_size_ = Prop(env, o, "slotSize");
  limits_.max_capsule = Prop(env, o, "maxCapsule");
  limits_.max_transfer = Prop(env, o, "maxTransfer");
  limits_.max_immediate = Prop(env, o, "maxImmediate");
  credits_ = Prop(env, o, "credits");
  ordered_ = Flag(o, "ordered");
  // §12.1: remote CQ data is the answer only where a later RSP or TSK_RSP
  // cannot overtake it (FI_ORDER_SAW), as on the JS path (fabric-transport.ts).
  remote_data_ = Flag(o, "remoteData") && ordered_;
  trains_ = Flag(o, "trains");
  Napi::Value bounds = o.Get("latencyBuckets");
  if (bounds.IsArray()) {
    Napi::Array a = bounds.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length() && i < 64; i++) latency_bounds_.push_back(a.Get(i).ToNumber().DoubleValue());
  }
  if (slots == 0 || slots > 1024 || slot_size_ == 0 || slot_size_ % 4096 != 0)
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, "FastPath", "slots must be 1..1024 and slotSize a multiple of 4096");
  region_->CheckRange(env, 0, static_cast<double>(slots) * (slot_size_ + kRspSlot), "FastPath");

  Napi::Value reactors = o.Get("reactors");
  const bool use_reactor = !reactors.IsUndefined() && !reactors.IsNull();
  Reactors* pool = use_reactor ? UnwrapAs<Reactors>(env, reactors, &AddonData::reactors, "Reactors", "FastPath") : nullptr;
  uv_loop_t* loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  loop_ = loop;
  use_reactor_ = use_reactor;
  backends_.resize(kFastBackendCount);
  cmds_.resize(slots);
  for (size_t k = 0; k < kFastBackendCount; ++k) {
    if (kFastBackends[k]->eager) OpenBackend(env, k);
  }
  Napi::Value park = o.Get("qosPark");
  max_parked_ = park.IsUndefined() ? slots : std::min(slots, ToU32(env, park, "FastPath", "qosPark"));
  if (max_parked_ > 0 && OpenQosTimer(loop) != 0) max_parked_ = 0;  // no timer: JS waits, as before

  free_.reserve(slots);
  for (uint32_t i = slots; i > 0; --i) free_.push_back(i - 1);
  memory_ = region_->memory();
  memory_->Retain();
  base_ = region_->data();
  desc_ = region_->desc();
  endpoint_ref_ = Napi::Persistent(info[0].As<Napi::Object>());
  region_ref_ = Napi::Persistent(info[1].As<Napi::Object>());
  on_failed_ = Napi::Persistent(info[4].As<Napi::Function>());
  on_idle_ = Napi::Persistent(info[5].As<Napi::Function>());
  async_ = new Napi::AsyncContext(env, "rblk:FastPath");
  lock_ = endpoint_->lock();
  std::lock_guard<std::recursive_mutex> g(*lock_);
  cork_.Open(endpoint_->ep_, endpoint_->domain_, o.Get("cork"));  // docs/transport.md "Corked bursts"
  endpoint_->AttachConsumer(this);
  if (pool != nullptr) {
    reactors_ref_ = Napi::Persistent(reactors.As<Napi::Object>());
    (void)endpoint_->AttachReactor(pool->Pick());
  }
}

FastPath::~FastPath() {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  Shutdown();
  delete async_;
}

uint8_t* FastPath::SlotData(uint32_t slot) const { return base_ + static_cast<size_t>(slot) * slot_size_; }
uint8_t* FastPath::SlotRsp(uint32_t slot) const {
  return base_ + cmds_.size() * static_cast<size_t>(slot_size_) + static_cast<size_t>(slot) * kRspSlot;
}

// Stops taking commands and waits for the ring (the kernel may be writing
// into the slots); the endpoint's own close releases the op records.
bool FastPath::HasBackendIo() const {
  if (closed_) return false;
  for (const auto& b : backends_) {
    if (b != nullptr && b->in_flight() > 0) return true;
  }
  return false;
}

size_t FastPath::Shutdown(std::function<void()> settled) {
  if (closed_) return 0;
  // Back to the JS loop first: the orphans below watch their fds there.
  if (endpoint_ != nullptr) endpoint_->DetachReactor(true);
  closed_ = true;
  // Closed inside a burst (a hand-off to JS that ended the connection): what it queued goes now.
  if (endpoint_ != nullptr) cork_.End();
  cork_.Forget();
  CloseQosTimer();
  // No backend is waited for here: a slow or hung device (or a cluster that
  // is away) would stop the loop, and every other connection, until it
  // answered. What each still holds keeps the slots' pages alive instead,
  // and `settled` runs once they have all ended (docs/target.md "A lost
  // connection's commands").
  std::vector<size_t> left(backends_.size(), 0);
  size_t orphaned = 0;
  int busy = 0;
  for (size_t k = 0; k < backends_.size(); ++k) {
    left[k] = backends_[k] != nullptr ? backends_[k]->in_flight() : 0;
    orphaned += left[k];
    busy += left[k] > 0 ? 1 : 0;
  }
  auto parts = std::make_shared<int>(busy);
  auto part = [parts, settled = std::move(settled)]() {
    if (--*parts == 0 && settled) settled();
  };
  for (size_t k = 0; k < backends_.size(); ++k) {
    if (backends_[k] == nullptr) continue;
    if (left[k] > 0) {
      memory_->Retain();
      backends_[k]->Abandon(memory_, part);
    } else {
      backends_[k]->Abandon(nullptr, nullptr);
    }
  }
  if (endpoint_ != nullptr) endpoint_->DetachConsumer(this);
  endpoint_ = nullptr;
  if (memory_ != nullptr) memory_->Release();
  memory_ = nullptr;
  backlog_.clear();
  io_backlog_.clear();
  on_failed_.Reset();
  on_idle_.Reset();
  DropParked();  // after the callbacks are gone: nothing of them reaches JS
  endpoint_ref_.Reset();
  region_ref_.Reset();
  reactors_ref_.Reset();
  return orphaned;
}

void FastPath::EndpointClosed() {
  // Nothing more will complete on the CQ: commands waiting on it are over.
  // Those in a backend finish when it reports them (OnBackendReady), or at Shutdown.
  Endpoint* ep = endpoint_;
  endpoint_ = nullptr;
  cork_.Forget();  // its socket closes with it
  backlog_.clear();
  DropParked();
  for (uint32_t i = 0; i < cmds_.size(); ++i) {
    Cmd& c = cmds_[i];
    if (c.stage == Stage::kFree || c.stage == Stage::kIo) continue;
    c.pending = 0;
    Finish(i);
  }
  (void)ep;
}

bool FastPath::TryReceive(OpRecord* op, size_t* length) {
  if (closed_ || endpoint_ == nullptr || op->recv_buf == nullptr) return false;
  uint8_t* b = op->recv_buf;
  const size_t len = *length;
  TrainShape shape = trains_ ? ScanTrain(b, len) : TrainShape::kSingle;
  if (shape == TrainShape::kMalformed) return false;  // JS refuses it, as it would any malformed capsule
  if (shape == TrainShape::kSingle) {
    if (!TakeCapsule(b, len)) return false;
  } else {
    // A train is its capsules sent one by one, in order (§5.1): those taken
    // here are copied out; the first one that is not, and every one after it,
    // go to JS as the (shorter) train they are, whose rules then apply to them.
    size_t off = 0;
    while (off < len) {
      size_t piece = CapsuleLength(b + off);
      if (!TakeCapsule(b + off, piece)) break;
      off += piece;
    }
    if (off == 0) return false;
    if (off < len) {
      std::memmove(b, b + off, len - off);
      *length = len - off;
      return false;
    }
    trains_taken_++;
  }
  if (endpoint_ == nullptr) return true;  // closed from inside: the record is canceled with it
  // Everything needed is copied out: the receive goes back at once.
  ssize_t rc = fi_recv(endpoint_->ep_, op->recv_buf, op->recv_len, op->recv_desc, endpoint_->peer_, op);
  endpoint_->before_block_.Arm();
  // A failure means the connection is failing (a full receive queue cannot
  // happen: this buffer was just taken off it); its close cancels the record.
  (void)rc;
  return true;
}

// One CMD capsule of a received message: true when the fast path runs it
// (everything it needs copied out of the message), false when it is JS's.
bool FastPath::TakeCapsule(const uint8_t* b, size_t length) {
  if (closed_ || endpoint_ == nullptr) return false;
  FastCapsule c;
  if (!DecodeFastCapsule(b, length, limits_, &c)) return false;
  FastCdb d;
  if (!DecodeFastCdb(c.cdb, &d) || d.write != c.write) return false;
  // Tags and credits are the session's (target/rblk/connection.ts): while JS
  // holds any command, every command goes to JS, so a tag can only repeat
  // among the fast path's own; the overrun itself is for JS to refuse.
  // A command whose answer is out holds neither its credit nor its tag any
  // more (the initiator may reuse both at once, §11, §12.1), even while its
  // last completion is still to come here.
  if (js_outstanding_ != 0 || endpoint_->capsules_for_js() != 0 || in_flight_ - answered_ >= credits_ || free_.empty()) return false;
  auto it = luns_.find(c.lun);
  if (it == luns_.end()) return false;
  Lun& lun = it->second;
  if (!lun.allowed || !(d.write ? lun.writable : lun.readable)) return false;
  if (d.blocks == 0 || d.blocks > lun.max_blocks) return false;
  if (d.lba > lun.blocks || d.blocks > lun.blocks - d.lba) return false;
  uint64_t bytes = static_cast<uint64_t>(d.blocks) * lun.block_size;
  if (bytes != c.data_length || bytes > slot_size_) return false;
  uint64_t offset = d.lba * lun.block_size;
  if (offset % lun.align != 0 || bytes % lun.align != 0) return false;
  for (const Cmd& x : cmds_)
    if (x.stage != Stage::kFree && !x.rsp_sent && x.tag == c.tag) return false;
  // Last, so that only a command the fast path would run is charged: one
  // that must wait for its turn waits here (parked) or, beyond the bound, in
  // JS (fast-path-qos.cc, qos-bucket.h).
  uint64_t now = NowNs();
  QosVerdict qos = lun.qos.empty() ? QosVerdict::kRun : QosAdmit(lun, d.write, bytes, now);
  if (qos == QosVerdict::kDefer) return false;

  uint32_t slot = free_.back();
  free_.pop_back();
  Cmd& cmd = cmds_[slot];
  cmd.stage = Stage::kIo;
  cmd.tag = c.tag;
  cmd.lun = c.lun;
  cmd.write = d.write;
  cmd.immediate = c.immediate;
  cmd.dsync = d.write && (d.fua || lun.write_through);
  cmd.offset = offset;
  cmd.length = static_cast<uint32_t>(bytes);
  cmd.address = c.address;
  cmd.key = c.key;
  cmd.pending = 0;
  cmd.rsp_sent = false;
  cmd.by_data = false;
  cmd.failed = false;
  cmd.started_ns = now;
  if (c.immediate) std::memcpy(SlotData(slot), b + wire::kCmdData, bytes);
  in_flight_++;
  lun.in_flight++;
  taken_++;
  if (qos == QosVerdict::kPark) Park(slot);
  else Begin(slot);
  return true;
}

void FastPath::Begin(uint32_t slot) {
  Cmd& cmd = cmds_[slot];
  if (cmd.write && !cmd.immediate) {
    cmd.stage = Stage::kDataOut;
    if (!Post(slot, kDataOut)) HandOff(slot, "transfer", EIO);
  } else {
    StartIo(slot);
  }
}

// False when the post failed outright (the connection is broken).
bool FastPath::Post(uint32_t slot, int kind) {
  if (endpoint_ == nullptr) return false;
  Cmd& cmd = cmds_[slot];
  OpRecord* op = endpoint_->NewOp(0);
  op->owner = this;
  op->slot = slot;
  op->kind = static_cast<uint8_t>(kind);
  op->pages.push_back(memory_);
  memory_->Retain();
  cork_.Post();
  ssize_t rc;
  void* desc = desc_;
  if (kind == kRsp) {
    rc = endpoint_->PeerGone() ? -FI_ENOTCONN : fi_send(endpoint_->ep_, SlotRsp(slot), kGoodResponseSize, desc, endpoint_->peer_, op);
  } else {
    iovec iov{SlotData(slot), cmd.length};
    fi_rma_iov rma{cmd.address, cmd.length, cmd.key};
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = op;
    msg.addr = endpoint_->peer_;  // the RDM peer's address vector entry; unused on MSG
    uint64_t flags = FI_COMPLETION;
    // Without FI_ORDER_SAW, the RSP waits for the data's delivery (docs/protocol.md §12).
    if (kind == kDataIn && !ordered_) flags |= FI_DELIVERY_COMPLETE;
    // §12.1: the write of the last (here the only) byte carries the tag's low 32 bits.
    if (kind == kDataIn && cmd.by_data) {
      msg.data = cmd.tag & 0xffffffffu;
      flags |= FI_REMOTE_CQ_DATA;
    }
    rc = endpoint_->PeerGone() ? -FI_ENOTCONN
         : kind == kDataIn  ? fi_writemsg(endpoint_->ep_, &msg, flags)
                            : fi_readmsg(endpoint_->ep_, &msg, flags);
  }
  if (rc == -FI_EAGAIN) {
    endpoint_->FreeOp(op);
    backlog_.emplace_back(slot, kind);
    cmd.pending++;  // counted as if posted: Retry posts it
    return true;
  }
  if (rc != 0) {
    endpoint_->FreeOp(op);
    return false;
  }
  cmd.pending++;
  return true;
}

void FastPath::Retry() {
  if (backlog_.empty() || endpoint_ == nullptr) return;
  std::vector<std::pair<uint32_t, int>> again;
  again.swap(backlog_);
  for (size_t i = 0; i < again.size(); ++i) {
    uint32_t slot = again[i].first;
    cmds_[slot].pending--;
    if (!Post(slot, again[i].second)) {
      HandOff(slot, "transfer", EIO);
    } else if (!backlog_.empty()) {
      // Still full: keep the rest in order behind it.
      for (size_t j = i + 1; j < again.size(); ++j) {
        backlog_.push_back(again[j]);
      }
      return;
    }
  }
}

void FastPath::StartIo(uint32_t slot) {
  Cmd& cmd = cmds_[slot];
  cmd.stage = Stage::kIo;
  const Lun& lun = luns_[cmd.lun];
  FastBackend* b = backends_[lun.backend].get();
  int rc = b != nullptr ? b->Queue(lun.volume, FastIo{slot, cmd.write, cmd.dsync, SlotData(slot), cmd.length, cmd.offset}) : -EBADF;
  if (rc == -EBUSY) io_backlog_.push_back(slot);  // no room: queued again after the next drain
  else if (rc != 0) HandOff(slot, cmd.write ? "write" : "read", -rc);
}

void FastPath::AfterDrain() {
  if (closed_) return;
  Retry();
  while (!io_backlog_.empty()) {
    uint32_t slot = io_backlog_.front();
    const Cmd& cmd = cmds_[slot];
    const Lun& lun = luns_[cmd.lun];
    FastBackend* b = backends_[lun.backend].get();
    if (b == nullptr || b->Queue(lun.volume, FastIo{slot, cmd.write, cmd.dsync, SlotData(slot), cmd.length, cmd.offset}) != 0) break;
    io_backlog_.erase(io_backlog_.begin());
  }
  for (const auto& b : backends_) {
    if (b != nullptr) inline_ += b->Submit();
  }
  // Every burst ends here: a CQ drain, a backend's completions, released QoS parks.
  if (endpoint_ != nullptr) cork_.End();
}

std::vector<ConsumerSource> FastPath::ReactorSources() const {
  std::vector<ConsumerSource> sources;
  for (size_t k = 0; k < backends_.size(); ++k) {
    int fd = backends_[k] != nullptr ? backends_[k]->event_fd() : -1;
    if (fd >= 0) sources.push_back(ConsumerSource{fd, SourceBit(k)});
  }
  if (qos_timer_fd_ >= 0) sources.push_back(ConsumerSource{qos_timer_fd_, kQosSource});
  return sources;
}

void FastPath::OnReactorSources(uint32_t bits) {
  for (size_t k = 0; k < backends_.size(); ++k) {
    if (bits & SourceBit(k)) OnBackendReady(k);
  }
  if (bits & kQosSource) OnQosTimer();
}

void FastPath::DeliverQueued(const QueuedWork& work) {
  if (work.kind == kQueuedFailed) EmitFailed(work.tag, work.a, work.what, static_cast<int>(work.b), work.c);
  else if (work.kind == kQueuedIdle) EmitIdle(work.a);
}

void FastPath::Unwatch() {
  for (const auto& b : backends_) {
    if (b != nullptr) b->Unwatch();
  }
  qos_poller_.Stop();
}

void FastPath::Rewatch(uv_loop_t* loop) {
  if (closed_) return;
  for (const auto& b : backends_) {
    if (b != nullptr) b->Watch(loop);
  }
  if (qos_timer_fd_ >= 0 && qos_poller_.Start(loop, qos_timer_fd_, [this]() { OnQosTimer(); }) == 0) qos_poller_.SetRef(false);
}

void FastPath::OnBackendReady(size_t kind) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  if (closed_ || backends_[kind] == nullptr) return;
  backends_[kind]->Reap();
  if (closed_) return;
  // Posts and I/O that waited for room, and what the completions queued.
  AfterDrain();
  if (endpoint_ != nullptr) endpoint_->before_block_.Arm();
}

void FastPath::OpenBackend(Napi::Env env, size_t kind) {
  // While a reactor serves the connection, it watches the new fd (added
  // below); until then the JS loop does, and the reactor's attach moves it.
  bool attached = endpoint_ != nullptr && endpoint_->attached();
  FastBackendEnv benv{loop_,
                      use_reactor_,
                      !attached,
                      static_cast<uint32_t>(cmds_.size()),
                      uring_,
                      [this](uint32_t slot, int64_t result) { IoDone(slot, result); },
                      [this, kind]() { OnBackendReady(kind); }};
  int err = 0;
  const char* op = "open";
  std::unique_ptr<FastBackend> b = kFastBackends[kind]->open(benv, &err, &op);
  if (b == nullptr) throw MakeError(env, err != 0 ? err : EIO, op, false);
  if (attached && b->event_fd() >= 0) {
    int rc = endpoint_->AddReactorFd(b->event_fd(), SourceBit(kind));
    if (rc != 0) {
      b->Abandon(nullptr, nullptr);
      throw MakeError(env, rc < 0 ? -rc : EIO, "epoll_ctl", false);
    }
  }
  backends_[kind] = std::move(b);
}

// One backend I/O of a command ended (the ring's CQE or librbd's result):
// bytes, or -errno.
void FastPath::IoDone(uint32_t slot, int64_t res) {
  if (slot >= cmds_.size() || cmds_[slot].stage != Stage::kIo) return;
  Cmd& cmd = cmds_[slot];
  if (endpoint_ == nullptr) {
    Finish(slot);
  } else if (res < 0 || static_cast<uint64_t>(res) != cmd.length) {
    // A short transfer is EIO to the SCSI core, as a failed one (sense-map.ts).
    HandOff(slot, cmd.write ? "write" : "read", res < 0 ? static_cast<int>(-res) : EIO);
  } else if (cmd.write) {
    SendRsp(slot);
  } else if (remote_data_) {
    AnswerByData(slot);
  } else {
    cmd.stage = Stage::kDataIn;
    if (!Post(slot, kDataIn)) HandOff(slot, "transfer", EIO);
    else if (ordered_) SendRsp(slot);
  }
}

void FastPath::SendRsp(uint32_t slot) {
  Cmd& cmd = cmds_[slot];
  cmd.stage = Stage::kRsp;
  EncodeGoodResponse(SlotRsp(slot), cmd.tag);
  if (!Post(slot, kRsp)) {
    HandOff(slot, "transfer", EIO);
    return;
  }
  cmd.rsp_sent = true;
  answered_++;
}

// Version 2 (docs/protocol.md §12.1): the read ran in full with GOOD, no
// sense and no residual, so its one data write is also its answer. Its
// completion here (remote_data_ implies FI_ORDER_SAW, so no delivery-complete
// wait) frees the slot, as an RSP's would.
void FastPath::AnswerByData(uint32_t slot) {
  Cmd& cmd = cmds_[slot];
  cmd.stage = Stage::kDataIn;
  cmd.by_data = true;
  if (!Post(slot, kDataIn)) {
    HandOff(slot, "transfer", EIO);
    return;
  }
  cmd.rsp_sent = true;
  answered_++;
  by_data_++;
}

void FastPath::OnOpDone(OpRecord* op, int err) {
  uint32_t slot = op->slot;
  int kind = op->kind;
  endpoint_->FreeOp(op);
  if (closed_ || slot >= cmds_.size() || cmds_[slot].stage == Stage::kFree) return;
  Cmd& cmd = cmds_[slot];
  cmd.pending--;
  if (cmd.failed) {
    if (cmd.pending == 0) Finish(slot);
    return;
  }
  if (err != 0) {
    HandOff(slot, "transfer", err);
    return;
  }
  if (kind == kDataOut) {
    StartIo(slot);
  } else if (kind == kDataIn && !ordered_) {
    SendRsp(slot);
  } else if (cmd.rsp_sent && cmd.pending == 0) {
    Finish(slot);
  }
}

void FastPath::Finish(uint32_t slot) {
  Cmd& cmd = cmds_[slot];
  if (cmd.stage == Stage::kFree) return;
  cmd.stage = Stage::kFree;
  free_.push_back(slot);
  in_flight_--;
  if (cmd.rsp_sent) answered_--;
  if (cmd.rsp_sent && !cmd.failed) {
    Counts& k = counts_[cmd.lun];
    int d = cmd.write ? 1 : 0;
    double s = static_cast<double>(NowNs() - cmd.started_ns) / 1e9;
    k.ops[d]++;
    k.bytes[d] += cmd.length;
    k.seconds[d] += s;
    if (k.buckets[d].empty()) k.buckets[d].assign(latency_bounds_.size() + 1, 0);
    size_t b = 0;
    while (b < latency_bounds_.size() && s > latency_bounds_[b]) b++;
    k.buckets[d][b]++;
  }
  auto it = luns_.find(cmd.lun);
  if (it == luns_.end()) return;
  Lun& lun = it->second;
  lun.in_flight--;
  if (lun.in_flight == 0 && lun.watch && !on_idle_.IsEmpty()) {
    lun.watch = false;
    if (endpoint_ != nullptr && endpoint_->attached()) endpoint_->QueueForJs(QueuedWork{kQueuedIdle, cmd.lun, 0, 0, 0, nullptr});
    else EmitIdle(cmd.lun);
  }
}

void FastPath::EmitIdle(uint32_t lun) {
  if (on_idle_.IsEmpty()) return;
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  on_idle_.MakeCallback(Value(), {Napi::Number::New(env, lun)}, *async_);
}

// The command leaves the fast path. An I/O error (kind "read"/"write") is
// for JS to answer with the sense its table gives; a failed RDMA or send
// ("transfer") ends the session there. The slot is free once nothing of
// this command is left in the CQ.
void FastPath::HandOff(uint32_t slot, const char* kind, int err) {
  Cmd& cmd = cmds_[slot];
  if (cmd.stage == Stage::kFree) return;
  uint64_t tag = cmd.tag;
  uint32_t lun = cmd.lun;
  uint32_t length = cmd.length;
  handed_off_++;
  if (cmd.failed) return;
  bool transfer = std::strcmp(kind, "transfer") == 0;
  if (!transfer || cmd.pending == 0) {
    cmd.pending = 0;
    Finish(slot);
  } else {
    cmd.failed = true;  // the last completion frees it
  }
  if (on_failed_.IsEmpty()) return;
  if (endpoint_ != nullptr && endpoint_->attached()) {
    endpoint_->QueueForJs(QueuedWork{kQueuedFailed, lun, static_cast<uint32_t>(err), length, tag, kind});
    return;
  }
  EmitFailed(tag, lun, kind, err, length);
}

void FastPath::EmitFailed(uint64_t tag, uint32_t lun, const char* kind, int err, uint32_t length) {
  if (on_failed_.IsEmpty()) return;
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  try {
    on_failed_.MakeCallback(Value(),
                            {Napi::BigInt::New(env, tag), Napi::Number::New(env, lun), Napi::String::New(env, kind),
                             Napi::Number::New(env, err), Napi::Number::New(env, length)},
                            *async_);
  } catch (const Napi::Error& e) {
    napi_fatal_exception(env, e.Value());
  }
}

// setLun(lun, { fd, blockSize, blocks, maxBlocks, align, readable, writable, writeThrough, rbdApi?, rbdImage? }):
// publishes the LUN's eligibility record and allows it. The backend kind that
// claims the record serves it (fast-backends.cc): with rbdApi (rblk_rbd's
// table, rbd-c-api.h) and rbdImage, an RBD volume through librbd (fd unused);
// else the file or block device `fd` through io_uring.
Napi::Value FastPath::SetLun(const Napi::CallbackInfo& info) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  Napi::Env env = info.Env();
  uint32_t n = ToU32(env, info[0], "FastPath.setLun", "lun");
  if (!info[1].IsObject()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FastPath.setLun", "record must be an object");
  Napi::Object o = info[1].As<Napi::Object>();
  // The record's backend kind, and its handle there (fast-backend.h).
  size_t kind = 0;
  while (kind + 1 < kFastBackendCount && !kFastBackends[kind]->claims(o)) ++kind;
  FastVolume volume = kFastBackends[kind]->volume(env, o);
  if (backends_[kind] == nullptr && !closed_) OpenBackend(env, kind);
  Lun& lun = luns_[n];
  lun.backend = kind;
  lun.volume = volume;
  lun.block_size = Prop(env, o, "blockSize");
  lun.blocks = static_cast<uint64_t>(ToSafeInteger(env, o.Get("blocks"), "FastPath.setLun", "blocks"));
  lun.max_blocks = Prop(env, o, "maxBlocks");
  lun.align = std::max<uint32_t>(1, Prop(env, o, "align"));
  lun.readable = Flag(o, "readable");
  lun.writable = Flag(o, "writable");
  lun.write_through = Flag(o, "writeThrough");
  if (lun.block_size == 0) throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, "FastPath.setLun", "blockSize must be positive");
  SetQos(env, lun, o.Get("qos"));
  lun.allowed = !closed_;
  return env.Undefined();
}

// revoke(lun): from this call on, no command on the LUN starts here.
Napi::Value FastPath::Revoke(const Napi::CallbackInfo& info) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  uint32_t n = ToU32(info.Env(), info[0], "FastPath.revoke", "lun");
  auto it = luns_.find(n);
  if (it != luns_.end()) it->second.allowed = false;
  FlushParked(n);
  return info.Env().Undefined();
}

// inFlight(lun?, watch?): without a LUN, the commands here that hold a
// credit (not yet answered: the session's credit check, §11); on one LUN,
// every command still running there, answered or not; with watch, onIdle(lun)
// fires when a LUN that has some reaches none.
Napi::Value FastPath::InFlight(const Napi::CallbackInfo& info) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  Napi::Env env = info.Env();
  if (info[0].IsUndefined()) return Napi::Number::New(env, in_flight_ - answered_);
  uint32_t n = ToU32(env, info[0], "FastPath.inFlight", "lun");
  auto it = luns_.find(n);
  if (it == luns_.end()) return Napi::Number::New(env, 0);
  if (info[1].ToBoolean().Value() && it->second.in_flight > 0) it->second.watch = true;
  return Napi::Number::New(env, it->second.in_flight);
}

Napi::Value FastPath::HasTag(const Napi::CallbackInfo& info) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  uint64_t tag = ToU64(info.Env(), info[0], "FastPath.hasTag", "tag");
  for (const Cmd& c : cmds_)
    if (c.stage != Stage::kFree && !c.rsp_sent && c.tag == tag) return Napi::Boolean::New(info.Env(), true);
  return Napi::Boolean::New(info.Env(), false);
}

// setCounters(jsOutstanding, credits): the session's share of the credits.
Napi::Value FastPath::SetCounters(const Napi::CallbackInfo& info) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  js_outstanding_ = ToU32(info.Env(), info[0], "FastPath.setCounters", "jsOutstanding");
  credits_ = ToU32(info.Env(), info[1], "FastPath.setCounters", "credits");
  return info.Env().Undefined();
}

Napi::Value FastPath::Stats(const Napi::CallbackInfo& info) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("taken", Napi::Number::New(env, static_cast<double>(taken_)));
  o.Set("handedOff", Napi::Number::New(env, static_cast<double>(handed_off_)));
  o.Set("inFlight", Napi::Number::New(env, in_flight_));
  o.Set("answeredByData", Napi::Number::New(env, static_cast<double>(by_data_)));
  o.Set("ioInline", Napi::Number::New(env, static_cast<double>(inline_)));
  o.Set("trains", Napi::Number::New(env, static_cast<double>(trains_taken_)));
  o.Set("qosDeferred", Napi::Number::New(env, static_cast<double>(qos_deferred_)));
  o.Set("qosParked", Napi::Number::New(env, static_cast<double>(qos_parked_)));
  o.Set("qosReleased", Napi::Number::New(env, static_cast<double>(qos_released_)));
  o.Set("qosWaiting", Napi::Number::New(env, parked_));
  o.Set("reactor", Napi::Number::New(env, endpoint_ != nullptr ? endpoint_->reactor_index() : -1));
  o.Set("corked", Napi::Number::New(env, static_cast<double>(cork_.corks())));
  o.Set("uncorked", Napi::Number::New(env, static_cast<double>(cork_.uncorks())));
  return o;
}

// takeCounts(lun, out: Float64Array): what was answered GOOD on the LUN since
// the last call, then zeroed. out holds [readOps, readBytes, readSeconds,
// writeOps, writeBytes, writeSeconds, read buckets..., write buckets...], each
// bucket list latencyBuckets.length + 1 long, then, where out has room for
// them, [qosWaited, qosWaitSeconds]: commands that waited parked for their QoS
// turn and started, and their waits (fast-path-qos.cc). Returns the ops taken.
Napi::Value FastPath::TakeCounts(const Napi::CallbackInfo& info) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  Napi::Env env = info.Env();
  uint32_t n = ToU32(env, info[0], "FastPath.takeCounts", "lun");
  if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FastPath.takeCounts", "out must be a Float64Array");
  Napi::Float64Array out = info[1].As<Napi::Float64Array>();
  size_t nb = latency_bounds_.size() + 1;
  if (out.ElementLength() < 6 + 2 * nb)
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, "FastPath.takeCounts", "out is too short for the buckets");
  const bool qos = out.ElementLength() >= 8 + 2 * nb;
  for (size_t i = 0; i < (qos ? 8 : 6) + 2 * nb; i++) out[i] = 0;
  auto it = counts_.find(n);
  if (it == counts_.end()) return Napi::Number::New(env, 0);
  Counts& k = it->second;
  for (int d = 0; d < 2; d++) {
    out[3 * d] = static_cast<double>(k.ops[d]);
    out[3 * d + 1] = static_cast<double>(k.bytes[d]);
    out[3 * d + 2] = k.seconds[d];
    for (size_t b = 0; b < k.buckets[d].size() && b < nb; b++) out[6 + d * nb + b] = static_cast<double>(k.buckets[d][b]);
  }
  if (qos) {
    out[6 + 2 * nb] = static_cast<double>(k.qos_waited);
    out[7 + 2 * nb] = k.qos_wait_seconds;
  }
  double ops = static_cast<double>(k.ops[0] + k.ops[1]);
  counts_.erase(it);
  return Napi::Number::New(env, ops);
}

// close(onSettled?): returns how many librbd requests are still running (a
// write among them may yet land); onSettled() is called once they have all
// ended, so that JavaScript can fence their volume until then
// (docs/target.md "A lost connection's commands").
Napi::Value FastPath::Close(const Napi::CallbackInfo& info) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  Napi::Env env = info.Env();
  std::function<void()> settled;
  if (info.Length() > 0 && info[0].IsFunction() && HasBackendIo()) {
    // Called from the loop thread in FastRbd::Done, outside any JS call: a
    // thread-safe function is the N-API way to call back from there.
    auto tsfn = std::make_shared<Napi::ThreadSafeFunction>(Napi::ThreadSafeFunction::New(env, info[0].As<Napi::Function>(), "rblk:rbdOrphanSettled", 0, 1));
    settled = [tsfn]() {
      tsfn->NonBlockingCall();
      tsfn->Release();
    };
  }
  return Napi::Number::New(env, static_cast<double>(Shutdown(std::move(settled))));
}

}  // namespace rblk
