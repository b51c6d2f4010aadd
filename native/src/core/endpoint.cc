// Over 600 lines: an endpoint's posts, its CQ drain and its reactor hand-off
// share the op records, the pending list and the lock (endpoint.h), and each
// step reads best beside the others; the RDM side is in rdm.cc.
#include "endpoint.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/uio.h>
#include <time.h>

#include "addon-data.h"
#include "args.h"
#include "domain.h"
#include "errors.h"
#include "listener.h"
#include "memory-region.h"

namespace rblk {

namespace {
constexpr size_t kBatch = 256;      // completions per call into JS
constexpr size_t kCqRead = 32;      // entries per fi_cq_read
constexpr size_t kMaxIov = 16;      // iov entries rblk will pass in one RMA
constexpr size_t kAtomicSlot = 24;  // operand, compare, result: 3 x u64
// A batch entry whose context word is this is remote CQ data, not one of
// this side's operations (JS contexts are small array indices).
constexpr uint32_t kRemoteData = 0xFFFFFFFFu;
uint64_t NowNs();

}  // namespace

Napi::Function Endpoint::Init(Napi::Env env) {
  return DefineClass(env, "Endpoint",
                     {InstanceAccessor<&Endpoint::Completions>("completions"),
                      InstanceMethod<&Endpoint::Connect>("connect"), InstanceMethod<&Endpoint::Accept>("accept"),
                      InstanceMethod<&Endpoint::Send>("send"), InstanceMethod<&Endpoint::Inject>("inject"),
                      InstanceMethod<&Endpoint::Recv>("recv"), InstanceMethod<&Endpoint::Rma>("rma"),
                      InstanceMethod<&Endpoint::Atomic>("atomic"), InstanceMethod<&Endpoint::Poll>("poll"),
                      InstanceMethod<&Endpoint::SetBusyPoll>("setBusyPoll"),
                      InstanceMethod<&Endpoint::Received>("received"),
                      InstanceMethod<&Endpoint::Wakeups>("wakeups"),
                      InstanceMethod<&Endpoint::Close>("close"), InstanceMethod<&Endpoint::Reject>("reject"),
                      InstanceAccessor<&Endpoint::Port>("port"), InstanceAccessor<&Endpoint::Address>("address")});
}

// new Endpoint(domain, listener|null, requestId, node, service, onCompletions, onEvent, listen?)
// On an RDM domain, listener is a listening Endpoint and listen makes one (rdm.cc).
Endpoint::Endpoint(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Endpoint>(info), env_(info.Env()) {
  Napi::Env env = info.Env();
  domain_ = UnwrapAs<Domain>(env, info[0], &AddonData::domain, "Domain", "fi_endpoint");
  domain_->CheckOpen(env, "fi_endpoint");
  if (!info[5].IsFunction() || !info[6].IsFunction())
    throw Napi::TypeError::New(env, "Endpoint: onCompletions and onEvent must be functions");

  if (domain_->rdm()) {
    ConstructRdm(info);
  } else {
    // From a connection request, the fi_info stays the listener's until
    // fi_endpoint has taken its handle: if anything before that fails, the
    // request is still pending and the caller can still reject it (fi_cm(3):
    // a request must be accepted or rejected, or the provider keeps its socket).
    Listener* listener = nullptr;
    uint32_t request_id = 0;
    fi_info* open_info = nullptr;
    if (info[1].IsObject()) {
      listener = UnwrapAs<Listener>(env, info[1], &AddonData::listener, "Listener", "fi_endpoint");
      request_id = ToU32(env, info[2], "fi_endpoint", "requestId");
      open_info = listener->PeekRequest(request_id);
      if (open_info == nullptr)
        throw MakeUsageError(env, "ERR_UNKNOWN_REQUEST", EINVAL, "fi_endpoint", "no such pending connection request");
    } else {
      std::string node = info[3].IsString() ? info[3].As<Napi::String>().Utf8Value() : "";
      std::string service = info[4].IsString() ? info[4].As<Napi::String>().Utf8Value() : "";
      int rc = domain_->GetInfo(node.c_str(), service.c_str(), 0, &info_);
      if (rc != 0) {
        info_ = nullptr;
        throw MakeError(env, -rc, "fi_getinfo(" + node + ":" + service + ")");
      }
      open_info = info_;
    }

    // Opened eq → cq → ep (Teardown closes them in reverse). The queues take
    // the fds (an epoll set and a signal socketpair each on tcp), so they come
    // first: running out of fds (FI_EMFILE) then fails before the request is
    // consumed.
    const char* op = "";
    uv_loop_t* loop = nullptr;
    napi_get_uv_event_loop(env, &loop);
    loop_ = loop;
    int rc = eq_.Open(domain_->fabric(), loop, [this]() { OnEqReadable(); }, &op);
    if (rc == 0) {
      fi_cq_attr attr{};
      attr.size = open_info->tx_attr->size + open_info->rx_attr->size;
      attr.format = FI_CQ_FORMAT_DATA;  // .data carries a peer's remote CQ data
      attr.wait_obj = FI_WAIT_FD;
      op = "fi_cq_open";
      rc = fi_cq_open(domain_->domain(), &attr, &cq_, nullptr);
      if (rc != 0) cq_ = nullptr;
    }
    if (rc == 0) {
      op = "fi_endpoint";
      rc = fi_endpoint(domain_->domain(), open_info, &ep_, nullptr);
      if (rc != 0) ep_ = nullptr;
      else if (listener != nullptr) info_ = listener->TakeRequest(request_id);
      // fi_getinfo(3) FI_RX_CQ_DATA: remote CQ data then lands in a posted
      // receive (verbs). Without it (tcp, sockets) the provider reports it on an
      // entry of its own whose op_context is not ours (docs/transport.md).
      if (rc == 0) rx_cq_data_ = (open_info->rx_attr->mode & FI_RX_CQ_DATA) != 0;
    }
    int fd = -1;
    if (rc == 0) {
      op = "fi_control(FI_GETWAIT)";
      rc = fi_control(&cq_->fid, FI_GETWAIT, &fd);
    }
    if (rc == 0) {
      op = "fi_ep_bind(eq)";
      rc = fi_ep_bind(ep_, &eq_.eq()->fid, 0);
    }
    if (rc == 0) {
      op = "fi_ep_bind(cq)";
      rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV);
    }
    if (rc == 0) {
      op = "fi_enable";
      rc = fi_enable(ep_);
    }
    cq_fd_ = fd;
    if (rc == 0 && cq_poller_.Start(loop, fd, [this]() { OnCqReadable(); }) != 0) {
      op = "uv_poll_start";
      rc = -FI_EIO;
    }
    if (rc == 0 && before_block_.Init(loop, [this]() { OnBeforeBlock(); }) != 0) {
      op = "uv_prepare_init";
      rc = -FI_EIO;
    }
    if (rc != 0) {
      Teardown();
      throw MakeError(env, -rc, op);
    }
  }

  batch_.reset(new uint32_t[kBatch * 3]());
  batch_capacity_ = kBatch;
  Napi::ArrayBuffer batch_memory = Napi::ArrayBuffer::New(env, batch_.get(), kBatch * 3 * sizeof(uint32_t));
  completions_ = Napi::Persistent(Napi::Uint32Array::New(env, kBatch * 3, batch_memory, 0));
  domain_ref_ = Napi::Persistent(info[0].As<Napi::Object>());
  on_completions_ = Napi::Persistent(info[5].As<Napi::Function>());
  on_event_ = Napi::Persistent(info[6].As<Napi::Function>());
  async_ = new Napi::AsyncContext(env, "rblk:Endpoint");
  // Stay alive while open: the pollers call back into this object.
  Ref();
}

Endpoint::~Endpoint() {
  Teardown();
  delete async_;
  for (OpRecord* op : ops_) delete op;
}

// What a closed endpoint still held: its op records (all free once Teardown
// has run) and its completion batch.
void Endpoint::ReleaseClosed() {
  for (OpRecord* op : ops_) delete op;
  ops_.clear();
  ops_.shrink_to_fit();
  free_ops_.clear();
  free_ops_.shrink_to_fit();
  ReleaseBatch();
}

// The JS view goes first (it reads as empty from then on), then the memory.
void Endpoint::ReleaseBatch() {
  if (!completions_.IsEmpty()) {
    Napi::ArrayBuffer ab = completions_.Value().ArrayBuffer();
    if (!ab.IsDetached()) ab.Detach();
    completions_.Reset();
  }
  batch_.reset();
  batch_capacity_ = 0;
}

int Endpoint::BindMemory(fid_mr* mr) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  if (ep_ == nullptr) return -FI_EBADF;
  int rc = fi_mr_bind(mr, &ep_->fid, 0);
  return rc != 0 ? rc : fi_mr_enable(mr);
}

void Endpoint::CheckOpen(Napi::Env env, const char* op) const {
  if (ep_ == nullptr) throw MakeUsageError(env, "ERR_CLOSED", EBADF, op, "the endpoint is closed");
}

void Endpoint::CheckPeer(Napi::Env env, const char* op) const {
  if (PeerGone()) throw MakeUsageError(env, "FI_ENOTCONN", FI_ENOTCONN, op, "the peer endpoint has closed");
}

OpRecord* Endpoint::NewOp(uint32_t context) {
  OpRecord* op;
  if (free_ops_.empty()) {
    op = new OpRecord;
    ops_.push_back(op);
  } else {
    op = free_ops_.back();
    free_ops_.pop_back();
  }
  op->context = context;
  op->in_use = true;
  op->recv_buf = nullptr;
  op->owner = nullptr;
  op->cm = false;
  ++in_flight_;
  ++posted_;
  // Polled (no wait fd): whatever posts this, JS, the fast path or the
  // initiator queue, the timer goes back to back (rdm.cc OnPollTimer).
  if (poll_timer_ != nullptr && !poll_fast_) {
    last_busy_ns_ = NowNs();
    StartPollTimer(0);
  }
  // Whatever is posted now, fi_trywait must run before the loop sleeps.
  before_block_.Arm();
  return op;
}

void Endpoint::FreeOp(OpRecord* op) {
  for (Memory* m : op->pages) m->Release();
  op->pages.clear();
  op->in_use = false;
  --in_flight_;
  free_ops_.push_back(op);
}

// Stops polling, closes ep → cq → eq and returns the contexts of the
// operations that never completed: the caller rejects them. The endpoint goes
// first because it holds a reference on the queues it is bound to: libfabric
// refuses to close a bound CQ or EQ (fi_close returns -FI_EBUSY, fi_eq(3),
// fi_cq(3)), and on tcp each EQ left behind kept an epoll fd and a socketpair.
std::vector<uint32_t> Endpoint::Teardown() {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  DetachReactor(true);
  // What the reactor found for JS and JS has not seen: the ops among it are
  // still in use, so they are among the cancelled ones below.
  pending_.clear();
  capsules_for_js_ = 0;
  if (wake_ != nullptr) {
    wake_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(wake_), [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
    wake_ = nullptr;
  }
  if (consumer_ != nullptr) {
    CqConsumer* c = consumer_;
    consumer_ = nullptr;
    c->EndpointClosed();
  }
  cq_poller_.Stop();
  before_block_.Close();
  eq_.StopPolling();
  if (ep_ != nullptr) {
    fi_close(&ep_->fid);
    ep_ = nullptr;
  }
  TeardownRdm();  // the address vector and what else an RDM endpoint holds; bound to ep, closed after it
  if (cq_ != nullptr) {
    fi_close(&cq_->fid);
    cq_ = nullptr;
  }
  eq_.Close();
  if (info_ != nullptr) {
    fi_freeinfo(info_);
    info_ = nullptr;
  }
  std::vector<uint32_t> canceled;
  for (OpRecord* op : ops_) {
    if (!op->in_use) continue;
    if (op->owner == nullptr && !op->cm) canceled.push_back(op->context);
    FreeOp(op);
  }
  return canceled;
}

bool Endpoint::AttachConsumer(CqConsumer* c) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  if (consumer_ != nullptr) return false;
  consumer_ = c;
  return true;
}

void Endpoint::DetachConsumer(CqConsumer* c) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  if (consumer_ == c) consumer_ = nullptr;
}

void Endpoint::Flush(size_t count) {
  // The consumer's work first: the initiator queue's completions, so that an
  // RSP the target sent before a TSK_RSP in this batch is heard before it
  // (docs/protocol.md §14.2). Not while a reactor serves the endpoint: this
  // is then DeliverPending on the JS thread, without lock_, and the consumer's
  // work is the reactor's, which ran it at the end of its own drain. Run here
  // too, it raced with the reactor: a response posted here could complete in
  // the reactor's drain before its command was marked answered, and that
  // command never ended (docs/target.md "Reactors").
  if (consumer_ != nullptr && link_ == nullptr) consumer_->AfterDrain();
  Napi::Env env(env_);
  if (on_completions_.IsEmpty()) return;  // closed from inside an earlier batch
  on_completions_.MakeCallback(Value(), {Napi::Number::New(env, static_cast<double>(count))}, *async_);
}

void Endpoint::Emit(uint32_t a, uint32_t b, uint32_t c, OpRecord* op, size_t* count) {
  if (link_ != nullptr) {
    // A capsule for JS: the fast path takes nothing until JS has seen it.
    if (op != nullptr && op->recv_buf != nullptr) capsules_for_js_++;
    pending_.push_back(Pending{QueuedWork{0, a, b, c, 0, nullptr}, op});
    return;
  }
  batch_[3 * *count] = a;
  batch_[3 * *count + 1] = b;
  batch_[3 * *count + 2] = c;
  if (op != nullptr) FreeOp(op);
  ++*count;
  if (*count == batch_capacity_) {
    Flush(*count);
    *count = 0;
  }
}

size_t Endpoint::DrainCq() {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  // An shm peer of this process that has closed: its progress is unsafe (rdm.cc OnPollTimer).
  if (draining_ || cq_ == nullptr || PeerGone()) return 0;
  size_t total = 0;
  draining_ = true;
  size_t count = 0;
  fi_cq_data_entry entries[kCqRead];
  try {
    while (cq_ != nullptr) {
      ssize_t n = fi_cq_read(cq_, entries, kCqRead);
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        if (fi_cq_readerr(cq_, &err, 0) < 0) break;
        auto* op = static_cast<OpRecord*>(err.op_context);
        if (op == nullptr || !op->in_use) continue;
        if (op->cm) {
          // A handshake receive that failed (truncated: too long to be one): post it again.
          OnCmReceive(op, 0);
          continue;
        }
        if (op->owner != nullptr) {
          // A consumer's operation: its owner's, or nobody's once it detached.
          if (op->owner == consumer_) consumer_->OnOpDone(op, err.err != 0 ? err.err : FI_EIO);
          else FreeOp(op);
          continue;
        }
        Emit(op->context, err.err != 0 ? static_cast<uint32_t>(err.err) : FI_EIO, 0, op, &count);
        ++total;
      } else if (n > 0) {
        for (ssize_t i = 0; i < n; ++i) {
          // A write this side posted with data also carries the flag on
          // sockets; its completion has FI_WRITE, a peer's never does.
          if ((entries[i].flags & FI_REMOTE_CQ_DATA) != 0 && (entries[i].flags & FI_WRITE) == 0) {
            // A peer's fi_writedata: (kRemoteData, the data's low 32 bits, the
            // receive it consumed or kRemoteData). Only under FI_RX_CQ_DATA is
            // op_context one of ours.
            received_.fetch_add(1, std::memory_order_relaxed);
            auto* op = rx_cq_data_ ? static_cast<OpRecord*>(entries[i].op_context) : nullptr;
            if (op != nullptr && !op->in_use) op = nullptr;
            // One of the initiator queue's reads: it reposts the receive, if one was taken.
            if (consumer_ != nullptr && consumer_->TryRemoteData(static_cast<uint32_t>(entries[i].data), op)) continue;
            Emit(kRemoteData, static_cast<uint32_t>(entries[i].data), op != nullptr ? op->context : kRemoteData, op, &count);
            ++total;
            continue;
          }
          auto* op = static_cast<OpRecord*>(entries[i].op_context);
          if (op == nullptr || !op->in_use) continue;
          if (op->cm) {
            OnCmReceive(op, entries[i].len);
            continue;
          }
          if (op->recv_buf != nullptr) received_.fetch_add(1, std::memory_order_relaxed);
          if (op->owner != nullptr) {
            if (op->owner == consumer_) consumer_->OnOpDone(op, 0);
            else FreeOp(op);
            continue;
          }
          // A command the fast path takes, or an answer to one of the
          // initiator queue's commands, never reaches JS: its receive is reposted there.
          size_t len = entries[i].len;
          if (consumer_ != nullptr && op->recv_buf != nullptr && consumer_->TryReceive(op, &len)) continue;
          Emit(op->context, 0, static_cast<uint32_t>(len), op, &count);
          ++total;
        }
        // A short read emptied the queue: another fi_cq_read would only run
        // the provider's progress again (an epoll_wait on tcp) to say so. The
        // callers end with fi_trywait, which catches anything that arrives now.
        if (static_cast<size_t>(n) < kCqRead) break;
        continue;
      } else {
        break;  // -FI_EAGAIN: empty
      }
    }
    if (consumer_ != nullptr) consumer_->AfterDrain();
    if (count > 0) Flush(count);
  } catch (...) {
    draining_ = false;
    if (cq_ == nullptr && !delivering_) ReleaseClosed();
    throw;
  }
  draining_ = false;
  if (cq_ == nullptr && !delivering_) ReleaseClosed();  // closed from inside a batch
  return total;
}

namespace {
uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace

// Just before the loop sleeps, after something was posted. With busy polling
// on, first spin on the CQ for up to the budget, as SO_BUSY_POLL does for
// sockets: it trades CPU for the wake-up latency of the fd. Either way, end
// with the fi_trywait handshake so no completion is left behind.
void Endpoint::OnBeforeBlock() {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  // A reactor owns an attached endpoint's CQ (docs/architecture.md "Busy polling").
  if (busy_poll_ns_ > 0 && cq_ != nullptr && !attached()) {
    Napi::Env env(env_);
    Napi::HandleScope scope(env);
    uint64_t deadline = NowNs() + busy_poll_ns_;
    if (in_flight_ > 0) spins_++;
    try {
      while (cq_ != nullptr && in_flight_ > 0) {
        if (DrainCq() > 0 || NowNs() >= deadline) break;
      }
    } catch (const Napi::Error& e) {
      napi_fatal_exception(env, e.Value());
      return;
    }
  }
  OnCqReadable();
}

void Endpoint::OnCqReadable() {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  wakeups_++;
  Napi::Env env(env_);
  Napi::HandleScope scope(env);
  try {
    Progress();
    if (rdm_) {
      FlushCm();
      DeliverCmEvents();
    }
  } catch (const Napi::Error& e) {
    napi_fatal_exception(env, e.Value());
  }
}

void Endpoint::Progress() {
  for (;;) {
    DrainCq();
    // No wait fd (shm): nothing to fi_trywait on; the poll timer comes back.
    if (cq_fd_ < 0) return;
    if (cq_ == nullptr) return;
    fid* f = &cq_->fid;
    if (fi_trywait(domain_->fabric(), &f, 1) == 0) return;
  }
}

// On the reactor thread, under lock_ (reactor.cc Run).
void Endpoint::OnReactorEvents(uint32_t sources) {
  uint32_t mine = sources & ~(kReactorConsumer - 1);
  if (consumer_ != nullptr && mine != 0) consumer_->OnReactorSources(mine);
  // Whatever ran above may have posted: progress and fi_trywait in every case.
  Progress();
  Wake();
}

void Endpoint::Wake() {
  if (!pending_.empty() && wake_ != nullptr) uv_async_send(wake_);
}

void Endpoint::AfterPost() {
  if (link_ != nullptr) reactor_->Kick(link_);
  else if (cq_fd_ >= 0) before_block_.Arm();
}

int Endpoint::AttachReactor(std::shared_ptr<Reactor> reactor) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  if (reactor == nullptr || link_ != nullptr || consumer_ == nullptr || !consumer_->ServesReactor() || cq_ == nullptr || cq_fd_ < 0)
    return -EINVAL;
  // The RDM handshake's events are read with the CQ, on the JS thread (rdm.cc).
  if (rdm_) return -ENOTSUP;
  if (wake_ == nullptr) {
    wake_ = new uv_async_t;
    if (uv_async_init(loop_, wake_, [](uv_async_t* h) {
          if (h->data != nullptr) static_cast<Endpoint*>(h->data)->DeliverPending();
        }) != 0) {
      delete wake_;
      wake_ = nullptr;
      return -EIO;
    }
    wake_->data = this;
  }
  auto link = std::make_shared<ReactorLink>();
  link->client = this;
  link->lock = lock_;
  int rc = reactor->Add(link, cq_fd_, kReactorCq);
  for (const ConsumerSource& src : consumer_->ReactorSources()) {
    if (rc == 0) rc = reactor->Add(link, src.fd, src.bit);
  }
  if (rc != 0) {
    reactor->Remove(link);
    return rc;
  }
  // From here the reactor serves the fds; the JS loop stops watching them
  // (the uv handle of the wake-up keeps the loop alive instead, as the CQ's did).
  cq_poller_.Stop();
  before_block_.Close();
  consumer_->Unwatch();
  link_ = std::move(link);
  reactor_ = std::move(reactor);
  reactor_->Kick(link_);  // anything that arrived meanwhile
  return 0;
}

int Endpoint::AddReactorFd(int fd, uint32_t source) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  if (link_ == nullptr) return -EINVAL;
  return reactor_->Add(link_, fd, source);
}

void Endpoint::DetachReactor(bool rewatch) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  if (link_ == nullptr) return;
  link_->attached = false;
  reactor_->Remove(link_);
  link_.reset();
  reactor_.reset();
  if (!rewatch) return;
  if (cq_ != nullptr && cq_fd_ >= 0) {
    cq_poller_.Start(loop_, cq_fd_, [this]() { OnCqReadable(); });
    before_block_.Init(loop_, [this]() { OnBeforeBlock(); });
    before_block_.Arm();
  }
  if (consumer_ != nullptr) consumer_->Rewatch(loop_);
  Wake();
}

void Endpoint::QueueForJs(const QueuedWork& work) { pending_.push_back(Pending{work, nullptr}); }

// On the JS thread: what the reactor queued, in its order. Not under lock_
// while JS runs (the reactor goes on meanwhile).
void Endpoint::DeliverPending() {
  if (delivering_) return;  // the outer call picks up what is added now
  Napi::Env env(env_);
  Napi::HandleScope scope(env);
  delivering_ = true;  // a close() from a callback keeps the op records until the end here
  std::vector<Pending> local;
  try {
    for (;;) {
      {
        std::lock_guard<std::recursive_mutex> g(*lock_);
        local.clear();
        local.swap(pending_);
      }
      if (local.empty() || on_completions_.IsEmpty()) break;
      size_t count = 0;
      uint32_t capsules = 0;  // receives in the batch: JS has seen them once Flush returns
      auto flush = [&]() {
        Flush(count);
        count = 0;
        std::lock_guard<std::recursive_mutex> g(*lock_);
        capsules_for_js_ = capsules_for_js_ > capsules ? capsules_for_js_ - capsules : 0;
        capsules = 0;
      };
      for (const Pending& e : local) {
        if (on_completions_.IsEmpty() || !batch_) break;  // closed by an earlier callback
        if (e.work.kind == 0) {
          {
            std::lock_guard<std::recursive_mutex> g(*lock_);
            if (e.op != nullptr) {
              if (!e.op->in_use) continue;  // cancelled by a close: Teardown zeroed capsules_for_js_
              if (e.op->recv_buf != nullptr) capsules++;
              FreeOp(e.op);
            }
          }
          batch_[3 * count] = e.work.a;
          batch_[3 * count + 1] = e.work.b;
          batch_[3 * count + 2] = e.work.c;
          if (++count == batch_capacity_) flush();
          continue;
        }
        if (count > 0) flush();
        CqConsumer* consumer;
        {
          std::lock_guard<std::recursive_mutex> g(*lock_);
          consumer = consumer_;
        }
        if (consumer != nullptr) consumer->DeliverQueued(e.work);
      }
      if (count > 0 && !on_completions_.IsEmpty() && batch_) flush();
    }
  } catch (const Napi::Error& e) {
    napi_fatal_exception(env, e.Value());
  }
  delivering_ = false;
  if (!draining_ && cq_ == nullptr) ReleaseClosed();
}

// The EQ is the loop's alone (attached or not): only the drain takes lock_,
// so an attached connection's reactor goes on while JS hears the event.
void Endpoint::OnEqReadable() {
  Napi::Env env(env_);
  Napi::HandleScope scope(env);
  try {
    for (;;) {
      while (eq_.eq() != nullptr) {
        Napi::Object ev;
        fi_info* unused = nullptr;
        if (eq_.Read(env, &ev, &unused) == 0) break;
        if (unused != nullptr) fi_freeinfo(unused);
        // Deliver what completed before the peer went away, then the event.
        if (ev.Get("type").As<Napi::String>().Utf8Value() == "shutdown") {
          DrainCq();
          if (link_ != nullptr) {
            AfterPost();
            DeliverPending();
          }
        }
        if (on_event_.IsEmpty()) return;
        on_event_.MakeCallback(Value(), {ev}, *async_);
      }
      if (eq_.eq() == nullptr || eq_.TryWait(domain_->fabric())) return;
    }
  } catch (const Napi::Error& e) {
    napi_fatal_exception(env, e.Value());
  }
}

Napi::Value Endpoint::Completions(const Napi::CallbackInfo& info) {
  if (completions_.IsEmpty()) return Napi::Uint32Array::New(info.Env(), 0);
  return completions_.Value();
}

static void PrivateData(const Napi::Value& v, const void** pd, size_t* len) {
  *pd = nullptr;
  *len = 0;
  if (v.IsBuffer()) {
    *pd = v.As<Napi::Buffer<uint8_t>>().Data();
    *len = v.As<Napi::Buffer<uint8_t>>().Length();
  }
}

// connect(node, service, privateData|null): node/service were resolved in the constructor.
Napi::Value Endpoint::Connect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::lock_guard<std::recursive_mutex> g(*lock_);
  CheckOpen(env, "fi_connect");
  const void* pd;
  size_t len;
  PrivateData(info[2], &pd, &len);
  if (rdm_) {
    // docs/protocol.md "RDM endpoints": the request goes to the listener; its
    // endpoint for us answers (rdm.cc).
    if (listening_ || listener_addr_ == FI_ADDR_UNSPEC || peer_ != FI_ADDR_UNSPEC)
      throw MakeUsageError(env, "ERR_INVALID_STATE", EINVAL, "fi_connect", "this endpoint cannot connect");
    if (len > 256) throw MakeUsageError(env, "FI_EINVAL", FI_EINVAL, "fi_connect", "private data over 256 bytes");
    QueueCm(1, listener_addr_, pd, len, false);
    FlushCm();
    return env.Undefined();
  }
  CheckFabric(env, fi_connect(ep_, info_->dest_addr, pd, len), "fi_connect");
  return env.Undefined();
}

Napi::Value Endpoint::Accept(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::lock_guard<std::recursive_mutex> g(*lock_);
  CheckOpen(env, "fi_accept");
  const void* pd;
  size_t len;
  PrivateData(info[0], &pd, &len);
  if (rdm_) {
    // Connected as soon as the answer is queued: true tells JS not to wait
    // for an event (rdm.cc).
    if (listening_ || peer_ == FI_ADDR_UNSPEC)
      throw MakeUsageError(env, "ERR_INVALID_STATE", EINVAL, "fi_accept", "this endpoint has no request to accept");
    if (len > 256) throw MakeUsageError(env, "FI_EINVAL", FI_EINVAL, "fi_accept", "private data over 256 bytes");
    QueueCm(2, peer_, pd, len, false);
    FlushCm();
    return Napi::Boolean::New(env, true);
  }
  CheckFabric(env, fi_accept(ep_, pd, len), "fi_accept");
  return env.Undefined();
}

// send(mr, offset, length, context)
Napi::Value Endpoint::Send(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::lock_guard<std::recursive_mutex> g(*lock_);
  CheckOpen(env, "fi_send");
  CheckPeer(env, "fi_send");
  MemoryRegion* mr = MemoryRegion::FromValue(env, info[0], "fi_send");
  double off = info[1].ToNumber().DoubleValue(), len = info[2].ToNumber().DoubleValue();
  mr->CheckRange(env, off, len, "fi_send");
  if (len > static_cast<double>(info_->ep_attr->max_msg_size))
    throw MakeUsageError(env, "FI_EMSGSIZE", FI_EMSGSIZE, "fi_send", "message larger than the provider's max_msg_size");
  OpRecord* op = NewOp(ToU32(env, info[3], "fi_send", "context"));
  op->pages.push_back(mr->memory());
  mr->memory()->Retain();
  ssize_t rc = fi_send(ep_, mr->data() + static_cast<size_t>(off), static_cast<size_t>(len), mr->desc(), peer_, op);
  if (rc != 0) {
    FreeOp(op);
    throw MakeError(env, static_cast<int>(-rc), "fi_send");
  }
  AfterPost();
  return env.Undefined();
}

// inject(buffer): copied out before return, no completion.
Napi::Value Endpoint::Inject(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::lock_guard<std::recursive_mutex> g(*lock_);
  CheckOpen(env, "fi_inject");
  CheckPeer(env, "fi_inject");
  if (!info[0].IsBuffer()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "fi_inject", "data must be a Buffer");
  auto buf = info[0].As<Napi::Buffer<uint8_t>>();
  if (buf.Length() > info_->tx_attr->inject_size)
    throw MakeUsageError(env, "FI_EMSGSIZE", FI_EMSGSIZE, "fi_inject",
                         std::to_string(buf.Length()) + " bytes exceed the provider's inject size of " +
                             std::to_string(info_->tx_attr->inject_size));
  CheckFabric(env, static_cast<int>(fi_inject(ep_, buf.Data(), buf.Length(), peer_)), "fi_inject");
  AfterPost();
  return env.Undefined();
}

// recv(mr, offset, length, context)
Napi::Value Endpoint::Recv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::lock_guard<std::recursive_mutex> g(*lock_);
  CheckOpen(env, "fi_recv");
  MemoryRegion* mr = MemoryRegion::FromValue(env, info[0], "fi_recv");
  double off = info[1].ToNumber().DoubleValue(), len = info[2].ToNumber().DoubleValue();
  mr->CheckRange(env, off, len, "fi_recv");
  OpRecord* op = NewOp(ToU32(env, info[3], "fi_recv", "context"));
  op->pages.push_back(mr->memory());
  mr->memory()->Retain();
  op->recv_buf = mr->data() + static_cast<size_t>(off);
  op->recv_len = static_cast<size_t>(len);
  op->recv_desc = mr->desc();
  ssize_t rc = fi_recv(ep_, mr->data() + static_cast<size_t>(off), static_cast<size_t>(len), mr->desc(), peer_, op);
  if (rc != 0) {
    FreeOp(op);
    throw MakeError(env, static_cast<int>(-rc), "fi_recv");
  }
  AfterPost();
  return env.Undefined();
}

// rma(isWrite, [[mr, offset, length], ...], [[address, length, key], ...], context, deliveryComplete, remoteData?)
// remoteData (a u32) makes a write fi_writedata's: FI_REMOTE_CQ_DATA, so the
// peer's CQ reports it once the data is placed (fi_rma(3)).
Napi::Value Endpoint::Rma(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::lock_guard<std::recursive_mutex> g(*lock_);
  bool is_write = info[0].ToBoolean().Value();
  const char* name = is_write ? "fi_writemsg" : "fi_readmsg";
  CheckOpen(env, name);
  CheckPeer(env, name);
  if (!info[1].IsArray() || !info[2].IsArray())
    throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, name, "local and remote must be arrays");
  Napi::Array local = info[1].As<Napi::Array>(), remote = info[2].As<Napi::Array>();
  size_t iov_limit = std::min<size_t>(kMaxIov, info_->tx_attr->iov_limit);
  size_t rma_limit = std::min<size_t>(kMaxIov, info_->tx_attr->rma_iov_limit);
  if (local.Length() == 0 || local.Length() > iov_limit)
    throw MakeUsageError(env, "FI_EINVAL", FI_EINVAL, name,
                         "local iov count must be 1.." + std::to_string(iov_limit) + " for this provider");
  if (remote.Length() == 0 || remote.Length() > rma_limit)
    throw MakeUsageError(env, "FI_EINVAL", FI_EINVAL, name,
                         "remote iov count must be 1.." + std::to_string(rma_limit) + " for this provider");
  iovec iov[kMaxIov];
  void* desc[kMaxIov];
  MemoryRegion* mrs[kMaxIov];
  fi_rma_iov rma[kMaxIov];
  uint64_t local_total = 0, remote_total = 0;
  for (uint32_t i = 0; i < local.Length(); ++i) {
    Napi::Value e = local.Get(i);
    if (!e.IsArray()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, name, "local iov must be [mr, offset, length]");
    Napi::Array t = e.As<Napi::Array>();
    MemoryRegion* mr = MemoryRegion::FromValue(env, t.Get(0u), name);
    double off = t.Get(1u).ToNumber().DoubleValue(), len = t.Get(2u).ToNumber().DoubleValue();
    mr->CheckRange(env, off, len, name);
    iov[i].iov_base = mr->data() + static_cast<size_t>(off);
    iov[i].iov_len = static_cast<size_t>(len);
    desc[i] = mr->desc();
    mrs[i] = mr;
    local_total += static_cast<uint64_t>(len);
  }
  for (uint32_t i = 0; i < remote.Length(); ++i) {
    Napi::Value e = remote.Get(i);
    if (!e.IsArray()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, name, "remote iov must be [address, length, key]");
    Napi::Array t = e.As<Napi::Array>();
    rma[i].addr = ToU64(env, t.Get(0u), name, "remote address");
    rma[i].len = ToU32(env, t.Get(1u), name, "remote length");
    rma[i].key = ToU64(env, t.Get(2u), name, "remote key");
    remote_total += rma[i].len;
  }
  if (local_total != remote_total)
    throw MakeUsageError(env, "FI_EINVAL", FI_EINVAL, name,
                         "local length " + std::to_string(local_total) + " differs from remote length " +
                             std::to_string(remote_total));
  bool with_data = is_write && info.Length() > 5 && !info[5].IsUndefined() && !info[5].IsNull();
  uint32_t remote_data = 0;
  if (with_data) {
    if (domain_->cq_data_size() < 4)
      throw MakeUsageError(env, "FI_EOPNOTSUPP", FI_EOPNOTSUPP, name,
                           std::string("remote CQ data is not supported by the ") + info_->fabric_attr->prov_name +
                               " provider");
    remote_data = ToU32(env, info[5], name, "remote data");
  }
  OpRecord* op = NewOp(ToU32(env, info[3], name, "context"));
  for (uint32_t i = 0; i < local.Length(); ++i) {
    op->pages.push_back(mrs[i]->memory());
    mrs[i]->memory()->Retain();
  }
  fi_msg_rma msg{};
  msg.msg_iov = iov;
  msg.desc = desc;
  msg.iov_count = local.Length();
  msg.addr = peer_;
  msg.rma_iov = rma;
  msg.rma_iov_count = remote.Length();
  msg.context = op;
  uint64_t flags = FI_COMPLETION;
  if (with_data) {
    msg.data = remote_data;
    flags |= FI_REMOTE_CQ_DATA;
  }
  // Without FI_ORDER_SAW, a read's data must be delivered before the response SEND.
  if (is_write && info[4].ToBoolean().Value()) flags |= FI_DELIVERY_COMPLETE;
  ssize_t rc = is_write ? fi_writemsg(ep_, &msg, flags) : fi_readmsg(ep_, &msg, flags);
  if (rc != 0) {
    FreeOp(op);
    throw MakeError(env, static_cast<int>(-rc), name);
  }
  AfterPost();
  return env.Undefined();
}

// atomic('add' | 'cswap', scratch, offset, address, key, context): 64-bit
// unsigned operand at scratch[offset], compare at +8, the old value lands at +16.
Napi::Value Endpoint::Atomic(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::lock_guard<std::recursive_mutex> g(*lock_);
  std::string kind = info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "";
  const char* name = kind == "cswap" ? "fi_compare_atomic" : "fi_fetch_atomic";
  CheckOpen(env, name);
  CheckPeer(env, name);
  if (kind != "add" && kind != "cswap")
    throw MakeUsageError(env, "ERR_INVALID_ARG_VALUE", EINVAL, name, "op must be 'add' or 'cswap'");
  if (!domain_->has_atomics())
    throw MakeUsageError(env, "FI_EOPNOTSUPP", FI_EOPNOTSUPP, name,
                         std::string("atomics are not supported by the ") + domain_->info()->fabric_attr->prov_name +
                             " provider");
  MemoryRegion* mr = MemoryRegion::FromValue(env, info[1], name);
  double off = info[2].ToNumber().DoubleValue();
  mr->CheckRange(env, off, kAtomicSlot, name);
  if (static_cast<uint64_t>(off) % 8 != 0)
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, name, "atomic scratch offset must be 8-byte aligned");
  uint64_t addr = ToU64(env, info[3], name, "remote address");
  uint64_t key = ToU64(env, info[4], name, "remote key");
  OpRecord* op = NewOp(ToU32(env, info[5], name, "context"));
  op->pages.push_back(mr->memory());
  mr->memory()->Retain();
  uint8_t* slot = mr->data() + static_cast<size_t>(off);
  ssize_t rc;
  if (kind == "add") {
    rc = fi_fetch_atomic(ep_, slot, 1, mr->desc(), slot + 16, mr->desc(), peer_, addr, key, FI_UINT64, FI_SUM, op);
  } else {
    rc = fi_compare_atomic(ep_, slot, 1, mr->desc(), slot + 8, mr->desc(), slot + 16, mr->desc(), peer_, addr, key,
                           FI_UINT64, FI_CSWAP, op);
  }
  if (rc != 0) {
    FreeOp(op);
    throw MakeError(env, static_cast<int>(-rc), name);
  }
  AfterPost();
  return env.Undefined();
}

// setBusyPoll(microseconds): 0 turns it off.
Napi::Value Endpoint::SetBusyPoll(const Napi::CallbackInfo& info) {
  uint32_t us = ToU32(info.Env(), info[0], "setBusyPoll", "microseconds");
  busy_poll_ns_ = static_cast<uint64_t>(us) * 1000;
  return info.Env().Undefined();
}

Napi::Value Endpoint::Received(const Napi::CallbackInfo& info) {
  // A double holds it exactly up to 2^53 messages.
  return Napi::Number::New(info.Env(), static_cast<double>(received_.load(std::memory_order_relaxed)));
}

// wakeups(): { wakeups, spins } so far (see endpoint.h).
Napi::Value Endpoint::Wakeups(const Napi::CallbackInfo& info) {
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("wakeups", Napi::Number::New(info.Env(), static_cast<double>(wakeups_)));
  o.Set("spins", Napi::Number::New(info.Env(), static_cast<double>(spins_)));
  o.Set("rings", Napi::Number::New(info.Env(), static_cast<double>(rings_)));
  return o;
}

Napi::Value Endpoint::Poll(const Napi::CallbackInfo& info) {
  {
    std::lock_guard<std::recursive_mutex> g(*lock_);
    CheckOpen(info.Env(), "fi_cq_read");
    DrainCq();
    AfterPost();
    if (rdm_) {
      FlushCm();
      DeliverCmEvents();
    }
  }
  if (wake_ != nullptr) DeliverPending();  // attached once: what the reactor queued comes first
  return info.Env().Undefined();
}

// close(): returns the contexts of operations that will never complete.
Napi::Value Endpoint::Close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::lock_guard<std::recursive_mutex> g(*lock_);
  if (ep_ == nullptr && cq_ == nullptr) throw MakeUsageError(env, "ERR_CLOSED", EBADF, "Endpoint.close", "already closed");
  // Graceful disconnect (FI_SHUTDOWN at the peer); failure just means not
  // connected. Skipped where the provider's fi_shutdown is unsafe: fi_close
  // alone still reaches the peer as FI_SHUTDOWN there (docs/target.md).
  // An RDM peer hears of it by a handshake message (rdm.cc), sent once, best effort.
  if (ep_ != nullptr && rdm_ && !listening_ && peer_ != FI_ADDR_UNSPEC && !shutdown_seen_) {
    QueueCm(4, peer_, nullptr, 0, false);
    FlushCm();
  } else if (ep_ != nullptr && !rdm_ && domain_->shutdown_is_safe()) {
    fi_shutdown(ep_, 0);
  }
  std::vector<uint32_t> canceled = Teardown();
  on_completions_.Reset();
  on_event_.Reset();
  domain_ref_.Reset();
  // Closed from inside a batch, the drain still walks its entries (whose
  // contexts are the op records): it releases them when it ends.
  if (!draining_ && !delivering_) ReleaseClosed();
  Unref();
  Napi::Array out = Napi::Array::New(env, canceled.size());
  for (size_t i = 0; i < canceled.size(); ++i) out.Set(static_cast<uint32_t>(i), Napi::Number::New(env, canceled[i]));
  return out;
}

}  // namespace rblk
