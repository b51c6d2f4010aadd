// Reactor threads (docs/target.md "Reactors", docs/architecture.md "Completions"):
// a native thread with an epoll set of its own, which takes over the data
// path of the target connections given to it. Once a connection's fast path
// is attached, the reactor waits on the connection's CQ wait fd, its io_uring
// eventfd and its librbd eventfd, and drains them on its own thread; the
// JavaScript thread stays the control plane. Work for JavaScript (a capsule
// the fast path did not take, a command it handed back, an idle LUN) is
// queued on the endpoint in order and delivered on the JS thread through a
// uv_async handle.
//
// Rules that keep this simple (and dead-lock free):
// - No thread ever waits for another, except on the connection's lock, which
//   nobody holds while waiting for anything else.
// - Every uv handle stays on the JS thread's loop. Attaching stops the
//   connection's uv watches and adds the same fds here (epoll_ctl is
//   thread-safe); detaching, on the JS thread, removes them under the
//   connection's lock and starts the uv watches again, so after Detach
//   returns the reactor never touches the connection.
// - The reactor calls into a connection only under its lock and only while
//   its link says attached.
#pragma once
#include <napi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace rblk {

// What a reactor found ready on a connection, as bits.
enum ReactorSource : uint32_t {
  kReactorCq = 1,    // the endpoint's CQ wait fd
  kReactorRing = 2,  // the fast path's io_uring eventfd
  kReactorRbd = 4,   // the fast path's librbd eventfd
  kReactorKick = 8,  // the JS thread posted on the endpoint: run progress (fi_trywait)
  kReactorQos = 16,  // the fast path's QoS timerfd (fast-path-qos.cc)
};

class ReactorClient {
 public:
  virtual ~ReactorClient() = default;
  // On the reactor thread, with the link's lock held and the link attached.
  virtual void OnReactorEvents(uint32_t sources) = 0;
};

struct ReactorLink {
  uint64_t id = 0;
  ReactorClient* client = nullptr;
  std::shared_ptr<std::recursive_mutex> lock;  // the connection's
  bool attached = true;                        // under `lock`
  std::vector<int> fds;                        // under the reactor's own lock
};

class Reactor {
 public:
  explicit Reactor(uint32_t index);
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // 0 or -errno.
  int Start();
  void Stop();
  // Watches fd for the link (source: one ReactorSource bit). 0 or -errno.
  int Add(const std::shared_ptr<ReactorLink>& link, int fd, uint32_t source);
  // Stops every watch of the link; call with the link's lock held, from the JS thread.
  void Remove(const std::shared_ptr<ReactorLink>& link);
  // Has the reactor run the link's handler soon (the JS thread posted on it).
  void Kick(const std::shared_ptr<ReactorLink>& link);
  size_t connections();
  uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }
  uint32_t index() const { return index_; }

 private:
  void Run();
  void Wake();

  uint32_t index_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> wakeups_{0};
  std::mutex lock_;
  std::unordered_map<uint64_t, std::shared_ptr<ReactorLink>> links_;
  std::vector<uint64_t> kicks_;
};

// new Reactors(count): the JS handle of a set of reactor threads; endpoints
// are given to the least loaded one (FastPath's `reactors` option).
class Reactors : public Napi::ObjectWrap<Reactors> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Reactors(const Napi::CallbackInfo& info);
  ~Reactors() override;

  std::shared_ptr<Reactor> Pick();

 private:
  Napi::Value Size(const Napi::CallbackInfo& info);
  Napi::Value Stats(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  static void Cleanup(void* arg);
  void StopAll();

  std::vector<std::shared_ptr<Reactor>> reactors_;
  bool cleanup_hooked_ = false;
};

}  // namespace rblk
