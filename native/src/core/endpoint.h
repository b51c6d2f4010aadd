// An active FI_EP_MSG endpoint with its own completion queue and event queue.
// Operations carry a JS-chosen integer context; completions are drained in
// batches and reach JS as one call per batch (docs/architecture.md "Completions").
// Every posted operation holds a reference to the pages it touches until its
// completion (or cancellation on close), so memory never vanishes under the NIC.
#pragma once
#include <napi.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cq-consumer.h"
#include "event-queue.h"
#include "poller.h"
#include "reactor.h"

namespace rblk {

class Domain;
struct Memory;

class FastPath;
class InitiatorQueue;

struct OpRecord {
  uint32_t context = 0;
  bool in_use = false;
  std::vector<Memory*> pages;  // retained for the life of the operation
  // A receive's buffer, so the fast path can read the capsule and repost it.
  uint8_t* recv_buf = nullptr;
  size_t recv_len = 0;
  void* recv_desc = nullptr;
  // An operation of the endpoint's CQ consumer (cq-consumer.h), which JS
  // never sees: its completion goes to its owner, with the owner's own
  // bookkeeping (what kind of step, which command slot).
  CqConsumer* owner = nullptr;
  uint8_t kind = 0;
  uint32_t slot = 0;
  // A receive of the RDM handshake's (rdm.cc), which JS never sees.
  bool cm = false;
};

class Endpoint : public Napi::ObjectWrap<Endpoint>, public ReactorClient {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Endpoint(const Napi::CallbackInfo& info);
  ~Endpoint() override;

  int BindMemory(fid_mr* mr);
  // Where every send and RMA goes: the peer's address vector entry on an RDM
  // endpoint, unused (0) on a connected MSG one (docs/transport.md "RDM endpoints").
  fi_addr_t peer() const { return peer_; }
  // An shm peer in this same process that has closed: libfabric 1.17's shm
  // reaches such a peer through the closed endpoint's own memory, so nothing
  // may be sent to it any more (rdm.cc, docs/transport.md "RDM endpoints").
  bool PeerGone() const { return peer_alive_ != nullptr && !peer_alive_->load(std::memory_order_acquire); }
  void CheckOpen(Napi::Env env, const char* op) const;
  void CheckPeer(Napi::Env env, const char* op) const;

  // Reactors (reactor.h). Attach: from the JS thread, with the fast path
  // attached; 0 or -errno (the endpoint then stays on the JS thread). Detach:
  // from the JS thread; with `rewatch`, the JS loop watches the fds again.
  int AttachReactor(std::shared_ptr<Reactor> reactor);
  void DetachReactor(bool rewatch);
  bool attached() const { return link_ != nullptr; }
  int reactor_index() const { return reactor_ != nullptr ? static_cast<int>(reactor_->index()) : -1; }
  // The consumer's fd added while attached (the fast path's librbd eventfd, started late).
  int AddReactorFd(int fd, uint32_t source);
  // Work for JS a consumer found on the reactor, delivered in order with the
  // completions on the JS thread (CqConsumer::DeliverQueued); kind is not 0.
  void QueueForJs(const QueuedWork& work);

  // The CQ consumer (cq-consumer.h): at most one. Attach: false when the
  // endpoint already has one. Detach: a no-op unless `c` is the one attached.
  bool AttachConsumer(CqConsumer* c);
  void DetachConsumer(CqConsumer* c);
  bool has_consumer() const { return consumer_ != nullptr; }
  // Capsules a reactor queued for JS that JS has not seen yet: while any is,
  // a consumer must leave commands to JS too, or it would answer them out of
  // order (fast-path.h). Under lock_.
  uint32_t capsules_for_js() const { return capsules_for_js_; }
  const std::shared_ptr<std::recursive_mutex>& lock() const { return lock_; }
  void OnReactorEvents(uint32_t sources) override;

 private:
  Napi::Value Completions(const Napi::CallbackInfo& info);
  Napi::Value Connect(const Napi::CallbackInfo& info);
  Napi::Value Accept(const Napi::CallbackInfo& info);
  Napi::Value Send(const Napi::CallbackInfo& info);
  Napi::Value Inject(const Napi::CallbackInfo& info);
  Napi::Value Recv(const Napi::CallbackInfo& info);
  Napi::Value Rma(const Napi::CallbackInfo& info);
  Napi::Value Atomic(const Napi::CallbackInfo& info);
  Napi::Value Poll(const Napi::CallbackInfo& info);
  Napi::Value SetBusyPoll(const Napi::CallbackInfo& info);
  Napi::Value Received(const Napi::CallbackInfo& info);
  Napi::Value Wakeups(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value Reject(const Napi::CallbackInfo& info);
  Napi::Value Port(const Napi::CallbackInfo& info);
  Napi::Value Address(const Napi::CallbackInfo& info);

  // RDM endpoints (rdm.cc): an address vector, and the handshake over tagged
  // messages that stands in for the CM events of MSG endpoints.
  void ConstructRdm(const Napi::CallbackInfo& info);
  int OpenRdmQueues(fi_info* open_info, const char** op);
  int PostCmReceives(size_t count);
  void OnCmReceive(OpRecord* op, size_t len);
  // Queued, then sent (or retried while the provider says FI_EAGAIN) by FlushCm.
  void QueueCm(uint8_t kind, fi_addr_t to, const void* pd, size_t pd_len, bool remove_after,
               std::vector<uint8_t> bell = {});
  void FlushCm();
  void DeliverCmEvents();
  void StartPollTimer(uint64_t ms);
  void OnPollTimer();
  void TeardownRdm();
  // shm's doorbell (docs/transport.md "Progress without a wait fd").
  void OpenBell();
  void SetPeerBell(const uint8_t* name, size_t len);
  void OnBell();
  void RingPeer();
  void RingBell(const std::vector<uint8_t>& bell);

  friend class FastPath;
  friend class InitiatorQueue;
  OpRecord* NewOp(uint32_t context);
  void FreeOp(OpRecord* op);
  size_t DrainCq();
  void OnBeforeBlock();
  void OnCqReadable();
  void OnEqReadable();
  void Flush(size_t count);
  std::vector<uint32_t> Teardown();
  // One completion for JS: into the batch (delivered by Flush), or, while
  // attached to a reactor, onto pending_ with its op still held.
  void Emit(uint32_t a, uint32_t b, uint32_t c, OpRecord* op, size_t* count);
  // After a JS post: fi_trywait must run before anyone sleeps, by the reactor
  // when attached (a kick), else by the loop's prepare hook (BeforeBlock).
  void AfterPost();
  // Drain and fi_trywait until the CQ is quiet (the reactor's and the JS thread's pass).
  void Progress();
  void DeliverPending();
  void Wake();  // uv_async_send when something is pending

  CqConsumer* consumer_ = nullptr;  // between AttachConsumer and DetachConsumer
  uint32_t capsules_for_js_ = 0;
  Domain* domain_ = nullptr;
  fi_info* info_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_cq* cq_ = nullptr;
  EventQueue eq_;
  // RDM (rdm.cc).
  bool rdm_ = false;
  bool listening_ = false;
  fid_av* av_ = nullptr;
  fi_addr_t peer_ = 0;
  fi_addr_t listener_addr_ = FI_ADDR_UNSPEC;  // the connecting side's, for its request only
  std::vector<uint8_t> local_name_;
  std::vector<uint8_t> peer_name_;  // the connecting side's: whose shutdown counts
  uint64_t posted_ = 0;
  // shm in one process (rdm.cc LocalShm): this endpoint's flag, and its peer's when the peer is here too.
  std::shared_ptr<std::atomic<bool>> alive_;
  std::shared_ptr<std::atomic<bool>> peer_alive_;
  void FindLocalPeer(const uint8_t* name, size_t len);
  std::unique_ptr<uint8_t[]> cm_buf_;
  fid_mr* cm_mr_ = nullptr;
  struct CmOut {
    fi_addr_t to;
    std::vector<uint8_t> bytes;
    bool remove_after;  // an address inserted only to answer (a reject)
    std::vector<uint8_t> bell;  // shm: the receiver's doorbell, rung once the message is out (rdm.cc FlushCm)
    bool rang = false;          // rung while the provider answered FI_EAGAIN
  };
  std::deque<CmOut> cm_out_;
  struct CmEvent {
    std::string type;
    uint32_t request_id;
    std::vector<uint8_t> pd;
    int err;
  };
  std::vector<CmEvent> cm_events_;
  std::unordered_map<uint32_t, std::vector<uint8_t>> requests_;  // listening: id -> the initiator's address
  uint32_t next_request_ = 1;
  int reserve_fd_ = -1;  // shm listener: its address:port held in the TCP port space
  int port_ = 0;
  std::string address_;
  bool shutdown_seen_ = false;
  // A CQ without a wait fd (shm): polled on a timer of the JS loop, and
  // back to back while busy by an idle handle, which polls once per loop
  // iteration and so never starves the loop's fds (rdm.cc StartPollTimer).
  uv_timer_t* poll_timer_ = nullptr;
  uv_idle_t* poll_idle_ = nullptr;
  uint64_t last_busy_ns_ = 0;
  bool poll_fast_ = false;  // polled back to back (by poll_idle_)
  // The doorbell: a datagram socket named after this endpoint that a peer
  // rings after it posts, so that a sleeping loop wakes at once (rdm.cc).
  int bell_fd_ = -1;
  FdPoller bell_poller_;
  std::vector<uint8_t> peer_bell_;  // the peer's bell address (sockaddr_un), empty: none
  std::vector<uint8_t> listener_bell_;  // the connecting side's: its listener's bell, for the request
  uint64_t rung_posted_ = 0;        // posted_ when the peer was last rung
  bool ring_back_ = false;          // the peer rang with "answer": ring it after the next pass
  uint64_t rings_ = 0;
  FdPoller cq_poller_;
  BeforeBlock before_block_;
  bool draining_ = false;
  uint64_t busy_poll_ns_ = 0;
  bool rx_cq_data_ = false;  // remote CQ data consumes a posted receive (FI_RX_CQ_DATA)  // 0: wait on the fd only (the default)

  // Every message and remote CQ data that arrived, whichever consumer took it
  // (JS, the fast path, the initiator queue): the control plane's liveness
  // clock reads it on its timer, so natively served commands count as heard
  // without a per-I/O crossing (docs/architecture.md "What the control plane
  // sees of native work"). Bumped under lock_, read from the JS thread without it.
  std::atomic<uint64_t> received_{0};

  // How often the JS thread woke for this endpoint (the CQ fd was readable, or
  // the loop was about to sleep after a post), and how often it spun before
  // sleeping: an idle endpoint adds to neither, which is what the tests check
  // instead of CPU time (docs/architecture.md "The test kit"). JS thread only.
  uint64_t wakeups_ = 0;
  uint64_t spins_ = 0;

  std::vector<OpRecord*> ops_;       // every record ever made (owned)
  std::vector<OpRecord*> free_ops_;  // reusable records
  size_t in_flight_ = 0;

  // (context, status, length) triples. The memory is the endpoint's own, seen
  // by JS through completions_ (an external ArrayBuffer): close() detaches the
  // view and frees it, so a closed endpoint holds no native memory until the
  // garbage collector finds its wrapper (docs/architecture.md, "Memory").
  std::unique_ptr<uint32_t[]> batch_;
  size_t batch_capacity_ = 0;
  void ReleaseBatch();
  void ReleaseClosed();

  // Every entry point takes it: the JS thread's calls and, when attached, the
  // reactor's passes (recursive: JS may post from inside a completion batch).
  std::shared_ptr<std::recursive_mutex> lock_ = std::make_shared<std::recursive_mutex>();
  uv_loop_t* loop_ = nullptr;  // the JS thread's
  int cq_fd_ = -1;
  std::shared_ptr<Reactor> reactor_;
  std::shared_ptr<ReactorLink> link_;
  uv_async_t* wake_ = nullptr;  // on loop_, from attach to teardown
  struct Pending {
    QueuedWork work;  // kind 0: a completion (a, b, c); else the consumer's
    OpRecord* op;     // a completion's op, freed at delivery (or cancelled by close)
  };
  std::vector<Pending> pending_;
  bool delivering_ = false;

  napi_env env_ = nullptr;
  Napi::ObjectReference domain_ref_;
  Napi::Reference<Napi::Uint32Array> completions_;
  Napi::FunctionReference on_completions_;
  Napi::FunctionReference on_event_;
  Napi::AsyncContext* async_ = nullptr;
};

}  // namespace rblk
