#include "reactor.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "args.h"
#include "errors.h"

namespace rblk {

namespace {
constexpr int kEvents = 64;
// epoll's u64: the link's id above the source bits; 0 is the wake eventfd.
constexpr unsigned kSourceBits = 5;  // the ReactorSource bits (reactor.h)
std::atomic<uint64_t> next_link_id{1};
}  // namespace

Reactor::Reactor(uint32_t index) : index_(index) {}

Reactor::~Reactor() { Stop(); }

int Reactor::Start() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return -errno;
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return -errno;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) return -errno;
  try {
    thread_ = std::thread([this]() { Run(); });
  } catch (const std::system_error& e) {
    return -e.code().value();
  }
  return 0;
}

// Also closes the epoll set and the wake-up fd: a stopped reactor holds none
// (Add then fails with EBADF, and the endpoint stays on the JS thread).
void Reactor::Stop() {
  if (thread_.joinable()) {
    stop_ = true;
    Wake();
    thread_.join();
  }
  std::lock_guard<std::mutex> g(lock_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  epoll_fd_ = -1;
  wake_fd_ = -1;
}

void Reactor::Wake() {
  if (wake_fd_ < 0) return;
  uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

int Reactor::Add(const std::shared_ptr<ReactorLink>& link, int fd, uint32_t source) {
  std::lock_guard<std::mutex> g(lock_);
  if (epoll_fd_ < 0) return -EBADF;
  if (link->id == 0) link->id = next_link_id.fetch_add(1);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = (link->id << kSourceBits) | source;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return -errno;
  links_[link->id] = link;
  link->fds.push_back(fd);
  return 0;
}

void Reactor::Remove(const std::shared_ptr<ReactorLink>& link) {
  std::lock_guard<std::mutex> g(lock_);
  // Before any of these fds is closed (and its number reused), so that the
  // set never holds a stranger's fd under this link's id.
  if (epoll_fd_ >= 0)
    for (int fd : link->fds) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  link->fds.clear();
  links_.erase(link->id);
}

void Reactor::Kick(const std::shared_ptr<ReactorLink>& link) {
  {
    std::lock_guard<std::mutex> g(lock_);
    kicks_.push_back(link->id);
  }
  Wake();
}

size_t Reactor::connections() {
  std::lock_guard<std::mutex> g(lock_);
  return links_.size();
}

void Reactor::Run() {
  // Seen in top -H, /proc/<pid>/task/*/comm and bench/reactors.ts.
  std::string name = "rblk-reactor-" + std::to_string(index_);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  epoll_event events[kEvents];
  std::vector<std::pair<std::shared_ptr<ReactorLink>, uint32_t>> ready;
  std::vector<uint64_t> kicks;
  while (!stop_) {
    int n = epoll_wait(epoll_fd_, events, kEvents, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;  // EBADF/EINVAL: nothing left to wait on
    }
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    ready.clear();
    kicks.clear();
    {
      std::lock_guard<std::mutex> g(lock_);
      auto mark = [&](uint64_t id, uint32_t bits) {
        for (auto& r : ready)
          if (r.first->id == id) {
            r.second |= bits;
            return;
          }
        auto it = links_.find(id);
        if (it != links_.end()) ready.emplace_back(it->second, bits);  // gone: removed since epoll_wait
      };
      for (int i = 0; i < n; ++i) {
        uint64_t d = events[i].data.u64;
        if (d == 0) {
          uint64_t ticks;
          while (read(wake_fd_, &ticks, sizeof ticks) < 0 && errno == EINTR) {
          }
          kicks.swap(kicks_);
          continue;
        }
        mark(d >> kSourceBits, static_cast<uint32_t>(d & ((1u << kSourceBits) - 1)));
      }
      for (uint64_t id : kicks) mark(id, kReactorKick);
    }
    for (auto& r : ready) {
      std::lock_guard<std::recursive_mutex> g(*r.first->lock);
      if (r.first->attached && r.first->client != nullptr) r.first->client->OnReactorEvents(r.second);
    }
    ready.clear();  // drop the links' references outside the lock
  }
}

Napi::Function Reactors::Init(Napi::Env env) {
  return DefineClass(env, "Reactors",
                     {InstanceAccessor<&Reactors::Size>("size"), InstanceAccessor<&Reactors::Stats>("stats"),
                      InstanceMethod<&Reactors::Close>("close")});
}

// new Reactors(count)
Reactors::Reactors(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Reactors>(info) {
  Napi::Env env = info.Env();
  uint32_t n = ToU32(env, info[0], "Reactors", "count");
  if (n == 0 || n > 64) throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, "Reactors", "count must be 1..64");
  for (uint32_t i = 0; i < n; ++i) {
    auto r = std::make_shared<Reactor>(i);
    if (int rc = r->Start(); rc != 0) {
      StopAll();
      throw MakeError(env, -rc, "reactor thread", false);
    }
    reactors_.push_back(std::move(r));
  }
  // Threads must not outlive the environment (a worker's exit unloads the addon).
  napi_add_env_cleanup_hook(env, &Reactors::Cleanup, this);
  cleanup_hooked_ = true;
}

Reactors::~Reactors() {
  if (cleanup_hooked_) napi_remove_env_cleanup_hook(Env(), &Reactors::Cleanup, this);
  StopAll();
}

void Reactors::Cleanup(void* arg) {
  auto* self = static_cast<Reactors*>(arg);
  self->cleanup_hooked_ = false;
  self->StopAll();
}

void Reactors::StopAll() {
  for (auto& r : reactors_) r->Stop();
}

std::shared_ptr<Reactor> Reactors::Pick() {
  std::shared_ptr<Reactor> best;
  size_t least = SIZE_MAX;
  for (auto& r : reactors_) {
    size_t n = r->connections();
    if (n < least) {
      least = n;
      best = r;
    }
  }
  return best;
}

Napi::Value Reactors::Size(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(reactors_.size()));
}

// [{ connections, wakeups }] per reactor.
Napi::Value Reactors::Stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array out = Napi::Array::New(env, reactors_.size());
  for (size_t i = 0; i < reactors_.size(); ++i) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("connections", Napi::Number::New(env, static_cast<double>(reactors_[i]->connections())));
    o.Set("wakeups", Napi::Number::New(env, static_cast<double>(reactors_[i]->wakeups())));
    out.Set(static_cast<uint32_t>(i), o);
  }
  return out;
}

// close(): stops the threads; a connection still attached is then not served
// (the daemon closes its connections first).
Napi::Value Reactors::Close(const Napi::CallbackInfo& info) {
  StopAll();
  return info.Env().Undefined();
}

}  // namespace rblk
