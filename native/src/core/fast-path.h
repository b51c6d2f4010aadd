// The target's native fast path (docs/target.md "Fast path"): READ and WRITE
// (10) and (16), FUA included, to file, block-device and rbd volumes, handled from
// the receive completion to the response without entering JavaScript. One per
// connection, attached to its Endpoint after login. For each receive the
// endpoint's CQ drain completes, the fast path decides "mine" or "not mine":
// mine when the capsule has the fast shape (fast-capsule.h), the CDB is a
// READ or WRITE (fast-cdb.h), and the eligibility record JS published for the
// LUN allows it and the command fits it; anything else goes up to JS in the
// completion batch exactly as before. A command it takes it also finishes:
// it reposts the receive, reads or writes the backend through io_uring (a ring
// of its own, reached through rblk_uring's C table, uring-c-api.h), moves the
// data by RDMA, sends a GOOD RSP and counts the credit back (on a version-2
// connection a GOOD read is answered by its data write's remote CQ data
// instead, docs/protocol.md §12.1). An I/O or RDMA
// error is not answered here: the command is handed to JS (onFailed), which
// owns the errno-to-sense table (target/scsi/sense-map.ts).
//
// JS revokes a LUN's record (revoke) before anything that needs the LUN to
// itself; revoke and every fast-path step run under the connection's lock, so
// once that call returns no new fast-path command starts, and inFlight(lun)
// says how many are still running (onIdle fires when a watched LUN reaches zero).
//
// Threads (the model is reactor.h's):
// - Owner: the JS thread creates, configures (setLun, revoke, setCounters,
//   takeCounts, stats) and closes it. The data path (TryReceive, OnOpDone,
//   AfterDrain, OnBackendReady) runs on the JS thread, or, once the
//   connection is attached to a reactor, on that reactor's thread and never
//   on both at once.
// - Lock: every member is guarded by the endpoint's recursive lock (lock_,
//   shared with the endpoint and kept past its close); the JS entry points
//   take it, the data path is entered with it held (Endpoint::DrainCq,
//   Endpoint::OnReactorEvents).
// - JS callbacks (onFailed, onIdle) run only on the JS thread: from a reactor
//   they are queued on the endpoint (Endpoint::QueueForJs) and handed back by
//   its uv_async handle (DeliverQueued, from Endpoint::DeliverPending).
// - The endpoint sees the fast path only as its CQ consumer (cq-consumer.h);
//   the fast path uses the endpoint's internals, never the other way round.
// - The QoS buckets are shared with JS and with other connections' reactors;
//   they are changed only by compare-and-swap (qos-bucket.h), never under a lock.
//   A command without room waits here, parked, until a timerfd of the fast
//   path's own says its limits have room (fast-path-qos.cc); the timerfd is
//   watched where the ring's eventfd is.
#pragma once
#include <napi.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cq-consumer.h"
#include "fast-backend.h"
#include "fast-capsule.h"
#include "fast-cdb.h"
#include "poller.h"
#include "reactor.h"
#include "socket-cork.h"
#include "uring-c-api.h"

namespace rblk {

class Endpoint;
class MemoryRegion;
struct Memory;
struct OpRecord;

class FastPath : public Napi::ObjectWrap<FastPath>, public CqConsumer {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit FastPath(const Napi::CallbackInfo& info);
  ~FastPath() override;

  // The endpoint's CQ consumer (cq-consumer.h). TryReceive: true when the
  // fast path took the message (and reposted its receive); on a train
  // (docs/protocol.md §5.1) it takes capsules in order until one is not its,
  // and hands that one and the rest to JS, moved to the buffer's start, with
  // *length cut to them. OnOpDone: a
  // fast-path op completed. AfterDrain: submits the I/O queued during the
  // drain in one io_uring_enter. EndpointClosed: its op records are about to
  // be released.
  bool TryReceive(OpRecord* op, size_t* length) override;
  void OnOpDone(OpRecord* op, int err) override;
  void AfterDrain() override;
  void EndpointClosed() override;
  // Reactors (reactor.h): the backends' eventfds (the ring's, librbd's) move
  // between the JS loop's watches and the reactor's epoll set; Unwatch/Rewatch
  // run on the JS thread under the endpoint's lock. OnBackendReady is what
  // either side runs when one is readable.
  bool ServesReactor() const override { return true; }
  std::vector<ConsumerSource> ReactorSources() const override;
  void OnReactorSources(uint32_t bits) override;
  void Unwatch() override;
  void Rewatch(uv_loop_t* loop) override;
  // On the JS thread: what the reactor queued (onFailed, onIdle).
  void DeliverQueued(const QueuedWork& work) override;

 private:
  // The kinds of work queued for JS from a reactor.
  enum : uint8_t { kQueuedFailed = 1, kQueuedIdle = 2 };
  // A backend kind's reactor bit (kFastBackends' index i: kReactorConsumer << i).
  static uint32_t SourceBit(size_t kind) { return kReactorConsumer << kind; }
  // Opens the connection's instance of a backend kind; throws on failure.
  void OpenBackend(Napi::Env env, size_t kind);
  // A backend's fd is readable: its completions, then what they let go on.
  void OnBackendReady(size_t kind);
  // The QoS timer's reactor bit (the consumer's last one; backends take the first ones).
  static constexpr uint32_t kQosSource = kReactorConsumer << 5;
  static_assert(kQosSource < (1u << kReactorSourceBits), "a reactor source has kReactorSourceBits bits");
  // The QoS timer fired: starts the parked commands whose limits have room (fast-path-qos.cc).
  void OnQosTimer();
  void EmitFailed(uint64_t tag, uint32_t lun, const char* kind, int err, uint32_t length);
  void EmitIdle(uint32_t lun);

  enum class Stage : uint8_t { kFree, kParked, kDataOut, kIo, kDataIn, kRsp };
  struct Lun {
    size_t backend = 0;  // index in kFastBackends
    FastVolume volume;
    uint32_t block_size = 512;
    uint64_t blocks = 0;
    uint32_t max_blocks = 0;
    uint32_t align = 1;  // O_DIRECT: offsets and lengths in these units
    bool readable = false;
    bool writable = false;
    bool write_through = false;  // WCE 0: every write durable
    // QoS buckets JS shares with us (qos-bucket.h): the volume's and the
    // initiator's, kept alive by qos_refs while the record holds them.
    std::vector<int64_t*> qos;
    std::vector<Napi::ObjectReference> qos_refs;
    // Commands taken but waiting for their QoS turn, in arrival order (slots; fast-path-qos.cc).
    std::deque<uint32_t> parked;
    bool allowed = false;
    bool watch = false;  // onIdle wanted when in_flight reaches 0
    uint32_t in_flight = 0;
  };
  struct Cmd {
    Stage stage = Stage::kFree;
    uint64_t tag = 0;
    uint32_t lun = 0;
    bool write = false;
    bool immediate = false;  // a WRITE's data came in the capsule (no RDMA READ)
    bool dsync = false;
    uint64_t offset = 0;  // backend byte offset
    uint32_t length = 0;
    uint64_t address = 0;
    uint64_t key = 0;
    int pending = 0;  // RMA/send ops of this command still in the CQ
    bool rsp_sent = false;  // answered (RSP posted, or the remote-data write): holds no credit or tag
    bool by_data = false;   // a READ answered by its data write's remote CQ data (docs/protocol.md §12.1)
    bool failed = false;  // a transfer failed: freed when its last op completes
    uint64_t started_ns = 0;  // CLOCK_MONOTONIC at the receive, for the latency histogram
  };
  // What the fast path answered GOOD on one LUN since JS last took the counts
  // (takeCounts): JS adds them to the LU's counters (target/scsi/request/io-stats.ts),
  // so that the counters have one home whichever path answered.
  struct Counts {
    uint64_t ops[2] = {0, 0};  // [read, write]
    uint64_t bytes[2] = {0, 0};
    double seconds[2] = {0, 0};
    std::vector<uint64_t> buckets[2];  // per bound of latency_bounds_, and +Inf last
    uint64_t qos_waited = 0;  // commands started after waiting parked for their QoS turn (fast-path-qos.cc)
    double qos_wait_seconds = 0;
  };

  Napi::Value SetLun(const Napi::CallbackInfo& info);
  void SetQos(Napi::Env env, Lun& lun, Napi::Value qos);
  // QoS admission of a command the fast path would take (fast-path-qos.cc):
  // run it now (charged), park it here, or leave it to JavaScript (kDefer).
  enum class QosVerdict : uint8_t { kRun, kPark, kDefer };
  QosVerdict QosAdmit(Lun& lun, bool write, uint64_t bytes, uint64_t now_ns);
  void Park(uint32_t slot);
  void ReleaseParked();
  // Revoked: the LUN's parked commands start now (charged), before revoke returns.
  void FlushParked(uint32_t lun);
  void ArmQosTimer();
  int OpenQosTimer(uv_loop_t* loop);
  void CloseQosTimer();
  // Parked commands end unrun: their slots and counts come back, once (close).
  size_t DropParked();
  Napi::Value Revoke(const Napi::CallbackInfo& info);
  Napi::Value DropParkedJs(const Napi::CallbackInfo& info);
  Napi::Value InFlight(const Napi::CallbackInfo& info);
  Napi::Value HasTag(const Napi::CallbackInfo& info);
  Napi::Value SetCounters(const Napi::CallbackInfo& info);
  Napi::Value Stats(const Napi::CallbackInfo& info);
  Napi::Value TakeCounts(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  // Returns how many backend requests (the ring's and librbd's) outlive it;
  // `settled` runs when they have all ended (ring-orphan.h, fast-rbd.h).
  size_t Shutdown(std::function<void()> settled = nullptr);
  // Whether Shutdown would leave requests behind.
  bool HasBackendIo() const;
  uint8_t* SlotData(uint32_t slot) const;
  uint8_t* SlotRsp(uint32_t slot) const;
  bool TakeCapsule(const uint8_t* b, size_t length);
  bool Post(uint32_t slot, int kind);
  // A taken command's first step: the RDMA READ of a WRITE's data, or the I/O.
  void Begin(uint32_t slot);
  void StartIo(uint32_t slot);
  void IoDone(uint32_t slot, int64_t result);
  void SendRsp(uint32_t slot);
  void AnswerByData(uint32_t slot);
  void Finish(uint32_t slot);
  void HandOff(uint32_t slot, const char* kind, int err);
  void Retry();

  Endpoint* endpoint_ = nullptr;
  // The endpoint's lock (endpoint.h lock_), kept past the endpoint's close.
  std::shared_ptr<std::recursive_mutex> lock_ = std::make_shared<std::recursive_mutex>();
  Napi::ObjectReference endpoint_ref_;
  Napi::ObjectReference reactors_ref_;
  Napi::ObjectReference region_ref_;
  MemoryRegion* region_ = nullptr;
  Memory* memory_ = nullptr;
  uint8_t* base_ = nullptr;
  void* desc_ = nullptr;
  const UringApi* uring_ = nullptr;
  uv_loop_t* loop_ = nullptr;
  bool use_reactor_ = false;
  // The connection's instance of each backend kind (fast-backend.h), by
  // kFastBackends' index: opened eagerly or with the kind's first LUN, and
  // abandoned at Shutdown (what is still in flight then lives on without us).
  std::vector<std::unique_ptr<FastBackend>> backends_;
  FastLimits limits_;
  uint32_t slot_size_ = 0;
  bool ordered_ = false;  // FI_ORDER_SAW: the RSP may follow the RDMA WRITE at once
  // Version 2 on a provider with remote CQ data and FI_ORDER_SAW: a GOOD read
  // is answered by fi_writedata and no RSP (docs/protocol.md §12.1).
  bool remote_data_ = false;
  // Version 5: a received message may be a train of CMDs (docs/protocol.md §5.1).
  bool trains_ = false;
  SocketCork cork_;  // a burst's answers in one transmit on tcp (socket-cork.h)
  bool closed_ = false;
  uint32_t credits_ = 0;
  uint32_t js_outstanding_ = 0;
  uint32_t in_flight_ = 0;
  uint32_t answered_ = 0;  // commands in flight whose answer is posted (their credit is back)
  uint64_t taken_ = 0, handed_off_ = 0, by_data_ = 0;
  uint64_t trains_taken_ = 0;  // trains whose every capsule was taken here
  uint64_t inline_ = 0;  // I/O the backend finished inside its submission (fast-backend.h Submit)
  uint64_t qos_deferred_ = 0;  // commands left to JS because a QoS bucket had no room yet
  // QoS parking (fast-path-qos.cc): at most max_parked_ commands wait here at once
  // (0: none; every command without room goes to JS as before).
  uint32_t max_parked_ = 0;
  uint32_t parked_ = 0;
  uint64_t qos_parked_ = 0, qos_released_ = 0;
  int qos_timer_fd_ = -1;
  int64_t qos_timer_at_ = 0;  // the absolute CLOCK_MONOTONIC time it is armed for (0: disarmed)
  int64_t qos_woke_at_ = 0;   // when it last fired
  FdPoller qos_poller_;
  std::vector<Cmd> cmds_;
  std::vector<uint32_t> free_;
  std::vector<std::pair<uint32_t, int>> backlog_;  // posts refused with FI_EAGAIN: (slot, kind)
  std::vector<uint32_t> io_backlog_;               // I/O the ring had no room for
  std::unordered_map<uint32_t, Lun> luns_;
  std::unordered_map<uint32_t, Counts> counts_;
  std::vector<double> latency_bounds_;  // seconds, ascending (LATENCY_BUCKETS_S)
  Napi::FunctionReference on_failed_;
  Napi::FunctionReference on_idle_;
  Napi::AsyncContext* async_ = nullptr;
};

}  // namespace rblk
