// The initiator's native command queue (docs/initiator.md "Fast path"): READ
// and WRITE with a registered buffer, from the library's submission to its
// completion without a JavaScript call per command. One per connection,
// attached to its Endpoint after login, as the target's FastPath is. JS writes
// submissions (lun, lba, blocks, write/FUA, the buffer's remote address and
// key) into a shared array and calls submit(n); the queue builds the CMD
// capsule (docs/protocol.md §9.1: READ/WRITE(10) or (16), one direct
// descriptor, or for a WRITE up to the login's immediate data size from a
// region the domain lists, the data itself), gives it a numeric tag, takes a
// credit from the cell it shares with JS and posts the send: on version 5 one
// send for the CMDs of one submit that fit in a train (§5.1), built back to
// back in the first one's send slot. The endpoint's CQ drain hands it the receives
// whose RSP carries one of its tags and the remote CQ data that names one of
// its reads (§12.1); everything else goes up to JS as before. A GOOD RSP with
// no sense and no residual, or the remote CQ data, completes the command
// here; any other answer is copied out raw for JS's decoder (sense, residuals,
// protocol errors stay JavaScript's). Completions reach JS as one call per
// CQ drain: (slot, result, answer length) triples.
//
// Tags: the queue's have a high word of 0 and a low word of bit 31, the
// slot's generation (15 bits) and the slot (16 bits); JS never uses a tag
// whose low 32 bits have bit 31 set while a queue is attached, so the tags,
// and the low 32 bits the target answers reads with, never collide (§5,
// §12.1). The generation changes each time a slot is taken, so an answer
// meant for a slot's earlier command (a target that answers twice, or late)
// never completes the command now in it: it goes up to JS, which treats an
// answer to no outstanding tag as the protocol error it is.
//
// Threads: the JS thread only. The initiator has no reactors (an endpoint
// with a queue refuses AttachReactor), so submit, the CQ drain that calls
// TryReceive/TryRemoteData/OnOpDone/AfterDrain, and the completion callback
// all run on the loop's thread; the endpoint's lock is held across the drain
// (Endpoint::OnCqReadable) and the queue takes no lock of its own. The
// submission array and the credit cell are shared with JS on that same
// thread: plain memory, no atomics.
#pragma once
#include <napi.h>

#include <cstdint>
#include <vector>

#include "cq-consumer.h"
#include "socket-cork.h"

namespace rblk {

class Endpoint;
class MemoryRegion;
struct Memory;
struct OpRecord;

class InitiatorQueue : public Napi::ObjectWrap<InitiatorQueue>, public CqConsumer {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit InitiatorQueue(const Napi::CallbackInfo& info);
  ~InitiatorQueue() override;

  // The endpoint's CQ consumer (cq-consumer.h): true when the queue took the
  // completion. AfterDrain: one call into JS with what completed during the
  // drain. It serves no reactor (the initiator has none), so an endpoint with
  // a queue stays on the JS thread.
  bool TryReceive(OpRecord* op, size_t* length) override;
  bool TryRemoteData(uint32_t data, OpRecord* consumed) override;
  void OnOpDone(OpRecord* op, int err) override;
  void AfterDrain() override;
  void EndpointClosed() override;

 private:
  struct Slot {
    bool busy = false;
    bool awaiting = false;      // no answer yet
    bool send_pending = false;  // the CMD's send is still in the CQ
    bool read = false;
    uint16_t gen = 0;  // 15 bits, in the tag above the slot
    // As a train's first command, whose send slot carries the train: the
    // tags of the others, failed with it if its send fails.
    std::vector<uint32_t> train;
  };

  Napi::Value Submit(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value Outstanding(const Napi::CallbackInfo& info);
  Napi::Value ImmediateWrites(const Napi::CallbackInfo& info);
  Napi::Value Trains(const Napi::CallbackInfo& info);
  Napi::Value Corked(const Napi::CallbackInfo& info);
  uint32_t PostMessage(Napi::Env env, uint32_t from, uint32_t n);

  void Shutdown();
  void Complete(uint32_t slot, uint32_t result, const uint8_t* answer, uint32_t length);
  void Flush();
  void MaybeFree(uint32_t slot);
  uint8_t* SendBuf(uint32_t slot) const;
  const uint8_t* ImmediateSource(uint64_t address, uint64_t key, uint32_t length) const;
  // The slot a tag's low word names, if it is this queue's current command in it.
  bool Current(uint32_t low, uint32_t* slot) const;

  Endpoint* endpoint_ = nullptr;
  Napi::ObjectReference endpoint_ref_;
  Napi::ObjectReference region_ref_;
  Memory* memory_ = nullptr;
  uint8_t* base_ = nullptr;
  void* desc_ = nullptr;
  bool closed_ = false;
  size_t inject_size_ = 0;  // a CMD up to the provider's inject size goes by fi_inject: no send completion
  bool remote_data_ = false;  // version 2: reads may be answered by remote CQ data
  uint32_t answer_size_ = 0;
  uint32_t slot_size_ = 0;  // send memory per slot: a CMD with one descriptor, or with immediate_ bytes of data
  uint32_t immediate_ = 0;  // the login's immediateDataSize: writes up to it carry their data (ImmediateSource)
  uint64_t immediate_writes_ = 0;  // WRITEs sent with their data in the CMD
  uint32_t train_ = 0;  // version 5: the largest message of several CMDs (docs/protocol.md §5.1); 0: one CMD each
  uint64_t trains_ = 0;  // messages that carried more than one CMD
  SocketCork cork_;      // a submit's messages in one transmit on tcp (socket-cork.h)
  uint32_t reserve_ = 1;  // credits kept for task management (docs/protocol.md §11)
  uint32_t outstanding_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;

  // Shared with JS (V8's memory, held here): submissions in, completions and
  // raw answers out, the credit cell.
  uint32_t done_count_ = 0;
  Napi::Reference<Napi::Uint32Array> sub_ref_;
  Napi::Reference<Napi::Uint32Array> done_ref_;
  Napi::Reference<Napi::Buffer<uint8_t>> answers_ref_;
  Napi::Reference<Napi::Int32Array> credits_ref_;
  Napi::FunctionReference on_complete_;
  Napi::AsyncContext* async_ = nullptr;
};

}  // namespace rblk
