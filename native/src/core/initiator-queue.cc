#include "initiator-queue.h"

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <cstring>

#include "addon-data.h"
#include "args.h"
#include "domain.h"
#include "endpoint.h"
#include "errors.h"
#include "memory-region.h"
#include "wire-layout.h"

namespace rblk {

namespace {
// The layout is native/src/core/wire-layout.h, generated from protocol/wire/constants.ts.
using namespace wire;
constexpr uint32_t kCmdSize = kCmdFixed + kDescriptorSize;  // one direct descriptor
constexpr uint32_t kGoodRsp = kRspFixed;
constexpr uint32_t kMaxCreditDelta = 4096;
constexpr uint32_t kTagBit = 0x80000000u;
constexpr uint32_t kGenShift = 16, kGenMask = 0x7fff, kSlotMask = 0xffff;
// SBC-4 5.15, 5.16, 5.46, 5.47: READ/WRITE (10) and (16); FUA is bit 3 of byte 1.
constexpr uint8_t kRead10 = 0x28, kWrite10 = 0x2a, kRead16 = 0x88, kWrite16 = 0x8a;
constexpr uint8_t kFua = 0x08;

// A submission: lun, lba hi, lba lo, blocks, flags, address hi, address lo,
// key hi, key lo, length; the queue writes the slot it took into word 10 and
// the low word of the command's tag into word 11.
constexpr uint32_t kSubWords = 12;
constexpr uint32_t kFlagWrite = 1, kFlagFua = 2;
// Completion results (native/initiator-queue.ts).
constexpr uint32_t kGood = 0, kAnswer = 1, kSendFailed = 2;

void Put16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void Put32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
void Put64(uint8_t* p, uint64_t v) {
  Put32(p, static_cast<uint32_t>(v >> 32));
  Put32(p + 4, static_cast<uint32_t>(v));
}
uint32_t Be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) | (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

uint32_t Prop(Napi::Env env, Napi::Object o, const char* name) { return ToU32(env, o.Get(name), "InitiatorQueue", name); }

// The READ/WRITE CDB protocol/scsi/cdb.ts read()/write() build for the same
// arguments: (10) when the LBA and length fit, else (16), as Linux sd does.
void BuildCdb(uint8_t* cdb, bool write, bool fua, uint64_t lba, uint32_t blocks) {
  std::memset(cdb, 0, 16);
  cdb[1] = fua ? kFua : 0;
  if (lba + blocks <= 0x100000000ull && blocks <= 0xffff) {
    cdb[0] = write ? kWrite10 : kRead10;
    Put32(cdb + 2, static_cast<uint32_t>(lba));
    Put16(cdb + 7, blocks);
  } else {
    cdb[0] = write ? kWrite16 : kRead16;
    Put64(cdb + 2, lba);
    Put32(cdb + 10, blocks);
  }
}

// The RSP JS would decode as GOOD with no sense and no residuals; its credit
// delta is returned through *delta. Anything else goes to JS's decoder.
bool PlainGood(const uint8_t* b, size_t len, uint32_t* delta) {
  if (len != kGoodRsp || b[kHeaderVersion] != kCapsuleVersion || b[kHeaderFlags] != 0 || b[kHeaderFlags + 1] != 0 || Be32(b + kHeaderLength) != kGoodRsp) return false;
  *delta = Be32(b + kRspCreditDelta);
  if (*delta > kMaxCreditDelta) return false;
  for (size_t i = kRspStatus; i < kGoodRsp; ++i)
    if (b[i] != 0) return false;
  return true;
}
}  // namespace

Napi::Function InitiatorQueue::Init(Napi::Env env) {
  return DefineClass(env, "InitiatorQueue",
                     {InstanceMethod<&InitiatorQueue::Submit>("submit"), InstanceMethod<&InitiatorQueue::Close>("close"),
                      InstanceAccessor<&InitiatorQueue::Outstanding>("outstanding"),
                      InstanceAccessor<&InitiatorQueue::ImmediateWrites>("immediateWrites"),
                      InstanceAccessor<&InitiatorQueue::Trains>("trains"),
                      InstanceAccessor<&InitiatorQueue::Corked>("corked")});
}

// new InitiatorQueue(endpoint, sendRegion, { slots, slotSize, immediate, answerSize, credits, remoteData, reserve, train?, cork? }, onComplete(count))
// train: the largest message of several CMDs (docs/protocol.md §5.1), at most slotSize; 0 or absent: one CMD per message.
// Exposes submissions (Uint32Array), completions (Uint32Array), answers
// (Buffer) and credits (Int32Array of one) as properties.
InitiatorQueue::InitiatorQueue(const Napi::CallbackInfo& info) : Napi::ObjectWrap<InitiatorQueue>(info) {
  Napi::Env env = info.Env();
  endpoint_ = UnwrapAs<Endpoint>(env, info[0], &AddonData::endpoint, "Endpoint", "InitiatorQueue");
  endpoint_->CheckOpen(env, "InitiatorQueue");
  MemoryRegion* region = MemoryRegion::FromValue(env, info[1], "InitiatorQueue");
  if (!info[2].IsObject() || !info[3].IsFunction())
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "InitiatorQueue", "options and onComplete are required");
  if (endpoint_->has_consumer())
    throw MakeUsageError(env, "ERR_INVALID_STATE", EBUSY, "InitiatorQueue", "the endpoint already has an initiator queue or a fast path");
  Napi::Object o = info[2].As<Napi::Object>();
  uint32_t slots = Prop(env, o, "slots");
  answer_size_ = Prop(env, o, "answerSize");
  slot_size_ = Prop(env, o, "slotSize");
  immediate_ = Prop(env, o, "immediate");
  uint32_t credits = Prop(env, o, "credits");
  reserve_ = Prop(env, o, "reserve");
  remote_data_ = o.Get("remoteData").ToBoolean().Value();
  Napi::Value train = o.Get("train");
  train_ = train.IsUndefined() ? 0 : ToU32(env, train, "InitiatorQueue", "train");
  if (slots == 0 || slots > 4096 || answer_size_ < kGoodRsp || answer_size_ > 65536)
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, "InitiatorQueue", "slots must be 1..4096 and answerSize 32..65536");
  if (immediate_ > 65536 || slot_size_ < kCmdSize || slot_size_ < kCmdFixed + immediate_ || slot_size_ > 128 * 1024)
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, "InitiatorQueue", "immediate must be 0..65536 and slotSize hold a CMD with it");
  if (train_ > slot_size_)
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, "InitiatorQueue", "a train must fit in one slot (train <= slotSize)");
  region->CheckRange(env, 0, static_cast<double>(slots) * slot_size_, "InitiatorQueue");

  slots_.resize(slots);
  free_.reserve(slots);
  for (uint32_t i = slots; i > 0; --i) free_.push_back(i - 1);
  inject_size_ = endpoint_->info_->tx_attr->inject_size;
  memory_ = region->memory();
  memory_->Retain();
  base_ = region->data();
  desc_ = region->desc();

  // JS-owned memory (V8 array buffers never move), referenced for the queue's life.
  Napi::Uint32Array sub = Napi::Uint32Array::New(env, static_cast<size_t>(slots) * kSubWords);
  Napi::Uint32Array done = Napi::Uint32Array::New(env, static_cast<size_t>(slots) * 3);
  Napi::Buffer<uint8_t> answers = Napi::Buffer<uint8_t>::New(env, static_cast<size_t>(slots) * answer_size_);
  Napi::Int32Array cell = Napi::Int32Array::New(env, 1);
  cell[0] = static_cast<int32_t>(credits);
  Napi::Object self = info.This().As<Napi::Object>();
  self.Set("submissions", sub);
  self.Set("completions", done);
  self.Set("answers", answers);
  self.Set("credits", cell);
  sub_ref_ = Napi::Persistent(sub);
  done_ref_ = Napi::Persistent(done);
  answers_ref_ = Napi::Persistent(answers);
  credits_ref_ = Napi::Persistent(cell);

  endpoint_ref_ = Napi::Persistent(info[0].As<Napi::Object>());
  region_ref_ = Napi::Persistent(info[1].As<Napi::Object>());
  on_complete_ = Napi::Persistent(info[3].As<Napi::Function>());
  async_ = new Napi::AsyncContext(env, "rblk:InitiatorQueue");
  cork_.Open(endpoint_->ep_, endpoint_->domain_, o.Get("cork"));  // docs/transport.md "Corked bursts"
  endpoint_->AttachConsumer(this);
}

InitiatorQueue::~InitiatorQueue() {
  Shutdown();
  delete async_;
}

uint8_t* InitiatorQueue::SendBuf(uint32_t slot) const { return base_ + static_cast<size_t>(slot) * slot_size_; }

// A WRITE small enough to go as immediate data (docs/protocol.md §9.1 format
// 3) whose buffer is one of this domain's remote regions: its bytes, else
// null (the CMD then names the buffer and the target RDMA-READs it). One copy
// into the capsule costs far less than the round trip of that read, which
// also needs this side's progress while it waits (docs/initiator.md "Fast
// path").
const uint8_t* InitiatorQueue::ImmediateSource(uint64_t address, uint64_t key, uint32_t length) const {
  if (length > immediate_ || endpoint_ == nullptr || endpoint_->domain_ == nullptr) return nullptr;
  const auto& regions = endpoint_->domain_->remote_regions()->by_key;
  auto it = regions.find(key);
  return it != regions.end() ? it->second->LocalBytes(address, length) : nullptr;
}

void InitiatorQueue::Shutdown() {
  if (closed_) return;
  closed_ = true;
  if (endpoint_ != nullptr) cork_.End();
  cork_.Forget();
  if (endpoint_ != nullptr) endpoint_->DetachConsumer(this);
  endpoint_ = nullptr;
  if (memory_ != nullptr) memory_->Release();
  memory_ = nullptr;
  done_count_ = 0;
  on_complete_.Reset();
  endpoint_ref_.Reset();
  region_ref_.Reset();
}

// The endpoint is closing: nothing more completes. JS fails what it has
// outstanding (the connection's loss), so nothing is reported from here on.
void InitiatorQueue::EndpointClosed() {
  endpoint_ = nullptr;
  Shutdown();
}

// submit(n): posts the first n entries of submissions; returns how many went
// out. The rest (no credit beyond the reserve, no slot, a full transmit
// queue) are the caller's to send another way.
Napi::Value InitiatorQueue::Submit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  // Closed with its endpoint, before JS heard of the loss: JS sends it, and learns.
  if (closed_ || endpoint_ == nullptr) return Napi::Number::New(env, 0);
  uint32_t n = ToU32(env, info[0], "InitiatorQueue.submit", "count");
  if (n > slots_.size()) throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, "InitiatorQueue.submit", "more entries than slots");
  uint32_t posted = 0;
  // The submit is one burst: its messages leave in one transmit (socket-cork.h),
  // also when a bad entry throws halfway.
  struct EndBurst {
    InitiatorQueue* q;
    ~EndBurst() {
      if (q->endpoint_ != nullptr) q->cork_.End();
    }
  } end_burst{this};
  while (posted < n && endpoint_ != nullptr) {
    uint32_t sent = PostMessage(env, posted, n);
    if (sent == 0) break;
    posted += sent;
  }
  return Napi::Number::New(env, posted);
}

// Builds and posts one message from entries [from, n): the first entry's CMD
// and, with trains on (docs/protocol.md §5.1), as many of the next ones as fit
// in train_ bytes, back to back in the first one's send slot. Returns how many
// entries it carried, or 0 when none could go (no slot, no credit beyond the
// reserve, or the post failed): nothing of an unposted message is committed.
uint32_t InitiatorQueue::PostMessage(Napi::Env env, uint32_t from, uint32_t n) {
  uint32_t* sub = sub_ref_.Value().Data();
  int32_t* credits = credits_ref_.Value().Data();
  uint8_t* msg = nullptr;
  size_t off = 0;
  uint32_t count = 0, immediates = 0;
  for (uint32_t i = from; i < n; ++i) {
    if (count >= free_.size() || credits[0] - static_cast<int32_t>(count) <= static_cast<int32_t>(reserve_)) break;
    uint32_t* e = sub + static_cast<size_t>(i) * kSubWords;
    uint32_t lun = e[0];
    uint64_t lba = (static_cast<uint64_t>(e[1]) << 32) | e[2];
    uint32_t blocks = e[3];
    bool write = (e[4] & kFlagWrite) != 0;
    uint64_t address = (static_cast<uint64_t>(e[5]) << 32) | e[6];
    uint64_t key = (static_cast<uint64_t>(e[7]) << 32) | e[8];
    uint32_t length = e[9];
    if (lun > 0x3fff || length == 0)
      throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, "InitiatorQueue.submit", "LUN above 16383 or an empty transfer");
    // The slots are taken from the back of the free list, in order, once the message is posted.
    uint32_t slot = free_[free_.size() - 1 - count];
    const uint8_t* immediate = write ? ImmediateSource(address, key, length) : nullptr;
    uint32_t size = immediate != nullptr ? kCmdFixed + length : kCmdSize;
    if (count == 0) msg = SendBuf(slot);
    else if (off + size > train_) break;
    uint8_t* b = msg + off;
    uint16_t gen = static_cast<uint16_t>((slots_[slot].gen + 1) & kGenMask);
    uint32_t tag = kTagBit | (static_cast<uint32_t>(gen) << kGenShift) | slot;
    // §5 header, §9.1 CMD, §9.2 LUN, one direct descriptor or the data itself.
    std::memset(b, 0, kCmdFixed);
    b[kHeaderOpcode] = kOpCmd;
    b[kHeaderVersion] = kCapsuleVersion;
    Put32(b + kHeaderLength, size);
    Put32(b + kHeaderTag + 4, tag);  // the tag's high word stays 0: §9.3's native tags
    if (lun < 256) {
      b[kCmdLun + 1] = static_cast<uint8_t>(lun);
    } else {
      b[kCmdLun] = static_cast<uint8_t>(0x40 | (lun >> 8));
      b[kCmdLun + 1] = static_cast<uint8_t>(lun);
    }
    b[kCmdDirection] = write ? kDirectionWrite : kDirectionRead;
    Put32(b + kCmdDataLength, length);
    BuildCdb(b + kCmdCdb, write, (e[4] & kFlagFua) != 0, lba, blocks);
    if (immediate != nullptr) {
      b[kCmdFormat] = kFormatImmediate;
      std::memcpy(b + kCmdData, immediate, length);
    } else {
      b[kCmdFormat] = kFormatDirect;
      b[kCmdDescriptorCount] = 1;
      std::memset(b + kCmdData, 0, kDescriptorSize);
      Put64(b + kCmdData + kDescriptorAddress, address);
      Put64(b + kCmdData + kDescriptorKey, key);
      Put32(b + kCmdData + kDescriptorLength, length);
    }
    e[10] = slot;
    e[11] = tag;
    off += size;
    ++count;
    if (immediate != nullptr) ++immediates;
    if (train_ == 0) break;
  }
  if (count == 0) return 0;

  uint32_t lead = free_[free_.size() - 1];
  ssize_t rc;
  bool inject = off <= inject_size_;
  cork_.Post();
  if (inject) {
    // Copied out at once and no completion (fi_msg(3) fi_inject), as JS sends its small capsules.
    rc = endpoint_->PeerGone() ? -FI_ENOTCONN : fi_inject(endpoint_->ep_, msg, off, endpoint_->peer_);
    endpoint_->before_block_.Arm();
  } else {
    OpRecord* op = endpoint_->NewOp(0);
    op->owner = this;
    op->slot = lead;
    op->pages.push_back(memory_);
    memory_->Retain();
    rc = endpoint_->PeerGone() ? -FI_ENOTCONN : fi_send(endpoint_->ep_, msg, off, desc_, endpoint_->peer_, op);
    if (rc != 0) endpoint_->FreeOp(op);
  }
  // A full transmit queue, or a failing connection: JS's own send queues
  // them, or reports the failure as the lost connection it is.
  if (rc != 0) return 0;
  Slot& first = slots_[lead];
  first.train.clear();
  for (uint32_t k = 0; k < count; ++k) {
    uint32_t* e = sub + static_cast<size_t>(from + k) * kSubWords;
    uint32_t slot = free_.back();
    free_.pop_back();
    Slot& s = slots_[slot];
    s.busy = true;
    s.awaiting = true;
    s.send_pending = false;
    s.read = (e[4] & kFlagWrite) == 0;
    s.gen = static_cast<uint16_t>((e[11] >> kGenShift) & kGenMask);
    // What a failed send of the lead's buffer must fail with it (OnOpDone).
    if (!inject && k > 0) first.train.push_back(e[11]);
  }
  first.send_pending = !inject;
  credits[0] -= static_cast<int32_t>(count);
  outstanding_ += count;
  immediate_writes_ += immediates;
  if (count > 1) trains_++;
  return count;
}

void InitiatorQueue::MaybeFree(uint32_t slot) {
  Slot& s = slots_[slot];
  if (!s.busy || s.awaiting || s.send_pending) return;
  s.busy = false;
  free_.push_back(slot);
}

void InitiatorQueue::Complete(uint32_t slot, uint32_t result, const uint8_t* answer, uint32_t length) {
  Slot& s = slots_[slot];
  s.awaiting = false;
  outstanding_--;
  uint32_t i = done_count_++;
  uint32_t* done = done_ref_.Value().Data();
  done[3 * i] = slot;
  done[3 * i + 1] = result;
  done[3 * i + 2] = length;
  if (answer != nullptr) std::memcpy(answers_ref_.Value().Data() + static_cast<size_t>(i) * answer_size_, answer, length);
  MaybeFree(slot);
  // JS may submit again from inside a batch of the endpoint's (its callback
  // runs microtasks): a full array goes up at once.
  if (done_count_ == slots_.size()) Flush();
}

bool InitiatorQueue::Current(uint32_t low, uint32_t* slot) const {
  if ((low & kTagBit) == 0) return false;
  uint32_t i = low & kSlotMask;
  if (i >= slots_.size() || !slots_[i].awaiting || slots_[i].gen != ((low >> kGenShift) & kGenMask)) return false;
  *slot = i;
  return true;
}

bool InitiatorQueue::TryReceive(OpRecord* op, size_t* received) {
  const size_t length = *received;
  if (closed_ || endpoint_ == nullptr || op->recv_buf == nullptr || length < kHeaderSize) return false;
  const uint8_t* b = op->recv_buf;
  if (b[kHeaderOpcode] != kOpRsp || Be32(b + kHeaderTag) != 0) return false;
  uint32_t slot = 0;
  if (!Current(Be32(b + kHeaderTag + 4), &slot)) return false;
  uint32_t delta = 0;
  if (PlainGood(b, length, &delta)) {
    credits_ref_.Value().Data()[0] += static_cast<int32_t>(delta);
    Complete(slot, kGood, nullptr, 0);
  } else {
    // Sense, residuals or a malformed answer: JS decodes it (and adds its credits).
    uint32_t n = static_cast<uint32_t>(length < answer_size_ ? length : answer_size_);
    Complete(slot, kAnswer, b, n);
  }
  if (endpoint_ == nullptr) return true;  // closed from inside a flush: the record is canceled
  // Copied out: the receive goes back at once, as JS would repost it.
  ssize_t rc = fi_recv(endpoint_->ep_, op->recv_buf, op->recv_len, op->recv_desc, endpoint_->peer_, op);
  endpoint_->before_block_.Arm();
  (void)rc;  // a failure means the connection is failing; its close cancels the record
  return true;
}

bool InitiatorQueue::TryRemoteData(uint32_t data, OpRecord* consumed) {
  uint32_t slot = 0;
  if (closed_ || endpoint_ == nullptr || !remote_data_ || !Current(data, &slot) || !slots_[slot].read) return false;
  // §12.1: the data is placed; GOOD, no sense, no residual, credit delta 1.
  credits_ref_.Value().Data()[0] += 1;
  Complete(slot, kGood, nullptr, 0);
  if (consumed != nullptr && endpoint_ != nullptr) {
    ssize_t rc = fi_recv(endpoint_->ep_, consumed->recv_buf, consumed->recv_len, consumed->recv_desc, endpoint_->peer_, consumed);
    endpoint_->before_block_.Arm();
    (void)rc;
  }
  return true;
}

void InitiatorQueue::OnOpDone(OpRecord* op, int err) {
  uint32_t slot = op->slot;
  if (endpoint_ != nullptr) endpoint_->FreeOp(op);
  if (closed_ || slot >= slots_.size() || !slots_[slot].busy) return;
  Slot& s = slots_[slot];
  s.send_pending = false;
  // The target never got the command, nor the rest of its train: no answer
  // will come. The credit each took is not returned (the connection is
  // failing; §15). A train's other commands are failed only while their slot
  // still holds them (the tag names slot and generation).
  if (err != 0) {
    std::vector<uint32_t> members;
    members.swap(s.train);  // Complete may call into JS, which may submit again
    for (uint32_t tag : members) {
      uint32_t other = 0;
      if (!closed_ && Current(tag, &other)) Complete(other, kSendFailed, nullptr, static_cast<uint32_t>(err));
    }
  }
  s.train.clear();
  if (err != 0 && s.awaiting) Complete(slot, kSendFailed, nullptr, static_cast<uint32_t>(err));
  else MaybeFree(slot);
}

void InitiatorQueue::AfterDrain() {
  if (!closed_ && done_count_ > 0) Flush();
}

void InitiatorQueue::Flush() {
  uint32_t n = done_count_;
  done_count_ = 0;
  if (n == 0 || on_complete_.IsEmpty()) return;
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  on_complete_.MakeCallback(Value(), {Napi::Number::New(env, n)}, *async_);
}

// Submits whose messages went out corked (socket-cork.h).
Napi::Value InitiatorQueue::Corked(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(cork_.corks()));
}

Napi::Value InitiatorQueue::Outstanding(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), outstanding_);
}

Napi::Value InitiatorQueue::ImmediateWrites(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(immediate_writes_));
}

Napi::Value InitiatorQueue::Trains(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(trains_));
}

Napi::Value InitiatorQueue::Close(const Napi::CallbackInfo& info) {
  Shutdown();
  return info.Env().Undefined();
}

}  // namespace rblk
