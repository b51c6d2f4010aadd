// A native consumer of an endpoint's completion queue (docs/architecture.md
// "Completions"): the target's FastPath and the initiator's InitiatorQueue
// take some of an endpoint's completions before JavaScript sees them. The
// endpoint knows its consumer only through this interface; a consumer may
// use the endpoint's internals (it is the endpoint's friend), never the other
// way round.
//
// An endpoint has at most one consumer, attached after login (AttachConsumer)
// and detached at the consumer's close (DetachConsumer). Each operation a
// consumer posts names it as its owner (OpRecord::owner); the endpoint hands
// that operation's completion to its owner while the owner is attached, and
// frees it otherwise. Receives and remote CQ data belong to no one until a
// consumer's TryReceive/TryRemoteData takes them; what it declines goes up to
// JavaScript in the completion batch.
//
// Threads: every call is made with the endpoint's lock held, on the thread
// that drains the CQ: the JS thread, or the endpoint's reactor thread once
// attached (reactor.h). DeliverQueued, Unwatch and Rewatch run on the JS
// thread only.
#pragma once
#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rblk {

struct OpRecord;

// An fd the endpoint's reactor watches for its consumer, and the bit the
// consumer's events come back as (a ReactorSource at or above kReactorConsumer).
struct ConsumerSource {
  int fd;
  uint32_t bit;
};

// Work a consumer found on a reactor thread for JavaScript: queued on the
// endpoint in order with the completions (Endpoint::QueueForJs) and handed
// back to the consumer on the JS thread (DeliverQueued). What the fields mean
// is the consumer's (kind 0 is the endpoint's own: a completion).
struct QueuedWork {
  uint8_t kind;
  uint32_t a, b, c;
  uint64_t tag;
  const char* what;
};

class CqConsumer {
 public:
  // A receive completed with *length bytes: true when the consumer took the
  // message (it reposts the receive itself). When it took only the front of
  // a train (docs/protocol.md §5.1), it returns false with the rest moved to
  // the buffer's start and *length cut to it, for JS.
  virtual bool TryReceive(OpRecord* op, size_t* length) = 0;
  // A peer's remote CQ data (and the receive it consumed, or null): true when taken.
  virtual bool TryRemoteData(uint32_t /*data*/, OpRecord* /*consumed*/) { return false; }
  // One of the consumer's own operations completed: err 0, or a positive
  // fi_errno. The consumer frees the record (Endpoint::FreeOp).
  virtual void OnOpDone(OpRecord* op, int err) = 0;
  // The end of a CQ drain pass, and before each completion batch goes to JS:
  // hand on what the pass gathered (submit queued I/O, report completions),
  // so that JS hears of it no later than of what came after it on the CQ.
  virtual void AfterDrain() = 0;
  // The endpoint is closing and has already forgotten this consumer: its
  // operation records are about to be released.
  virtual void EndpointClosed() = 0;

  // Reactors (reactor.h). A consumer that can be served there says so, names
  // the fds to watch beside the CQ's, and stops and restarts its own uv
  // watches of them as the endpoint moves between the JS loop and a reactor.
  virtual bool ServesReactor() const { return false; }
  virtual std::vector<ConsumerSource> ReactorSources() const { return {}; }
  virtual void OnReactorSources(uint32_t /*bits*/) {}
  virtual void Unwatch() {}
  virtual void Rewatch(uv_loop_t* /*loop*/) {}
  virtual void DeliverQueued(const QueuedWork& /*work*/) {}

 protected:
  ~CqConsumer() = default;
};

}  // namespace rblk
