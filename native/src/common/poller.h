// Watches a libfabric wait fd (FI_WAIT_FD, fi_control(FI_GETWAIT)) on the
// libuv loop, so an idle queue costs no CPU (docs/architecture.md
// "Completions"). The uv handle outlives this object until its close callback.
#pragma once
#include <uv.h>

#include <functional>

namespace rblk {

// Deletes `self` on a later turn of `loop`, in the close callback of a handle
// of its own: for an object whose poll callback may be running right now
// (fast-rbd.cc, ring-orphan.cc).
template <typename T>
void DeleteLater(uv_loop_t* loop, T* self) {
  auto* h = new uv_idle_t;
  uv_idle_init(loop, h);
  h->data = self;
  uv_close(reinterpret_cast<uv_handle_t*>(h), [](uv_handle_t* x) {
    delete static_cast<T*>(x->data);
    delete reinterpret_cast<uv_idle_t*>(x);
  });
}

class FdPoller {
 public:
  FdPoller() = default;
  FdPoller(const FdPoller&) = delete;
  FdPoller& operator=(const FdPoller&) = delete;
  ~FdPoller() { Stop(); }

  // Returns a uv error (negative) or 0.
  int Start(uv_loop_t* loop, int fd, std::function<void()> on_readable) {
    on_readable_ = std::move(on_readable);
    handle_ = new uv_poll_t;
    int rc = uv_poll_init(loop, handle_, fd);
    if (rc != 0) {
      delete handle_;
      handle_ = nullptr;
      return rc;
    }
    handle_->data = this;
    return uv_poll_start(handle_, UV_READABLE, &FdPoller::OnPoll);
  }

  // Whether the watch alone keeps the loop (and so the process) alive.
  void SetRef(bool ref) {
    if (handle_ == nullptr) return;
    if (ref) uv_ref(reinterpret_cast<uv_handle_t*>(handle_));
    else uv_unref(reinterpret_cast<uv_handle_t*>(handle_));
  }

  void Stop() {
    if (handle_ == nullptr) return;
    uv_poll_stop(handle_);
    handle_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(handle_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
    handle_ = nullptr;
  }

 private:
  static void OnPoll(uv_poll_t* h, int status, int events) {
    auto* self = static_cast<FdPoller*>(h->data);
    // status < 0 (e.g. EBADF) still means "look at the queue": the read reports the real error.
    if (self != nullptr) self->on_readable_();
  }

  uv_poll_t* handle_ = nullptr;
  std::function<void()> on_readable_;
};

}  // namespace rblk

namespace rblk {

// Runs a callback once, just before the loop next blocks for I/O (uv_prepare).
// libfabric's contract for wait fds is that fi_trywait must succeed after the
// last posted operation and before sleeping: a provider such as tcp may have
// buffered a send that only progress will flush, with nothing yet to wake the fd.
class BeforeBlock {
 public:
  BeforeBlock() = default;
  BeforeBlock(const BeforeBlock&) = delete;
  BeforeBlock& operator=(const BeforeBlock&) = delete;
  ~BeforeBlock() { Close(); }

  int Init(uv_loop_t* loop, std::function<void()> fn) {
    fn_ = std::move(fn);
    handle_ = new uv_prepare_t;
    int rc = uv_prepare_init(loop, handle_);
    if (rc != 0) {
      delete handle_;
      handle_ = nullptr;
      return rc;
    }
    handle_->data = this;
    idle_ = new uv_idle_t;
    uv_idle_init(loop, idle_);
    // A pending check must not keep the process alive on its own.
    uv_unref(reinterpret_cast<uv_handle_t*>(handle_));
    uv_unref(reinterpret_cast<uv_handle_t*>(idle_));
    return 0;
  }

  // Also starts an idle handle, which keeps the loop from sleeping until the
  // prepare pass has run (OnPrepare stops it, before libuv computes the poll
  // timeout, so an arm from the poll phase costs nothing). It matters for an
  // arm from inside the prepare phase, say when another handle's prepare
  // callback delivered completions to JS and JS posted here: libuv runs only
  // the prepare handles that were active when the phase began, so without the
  // idle handle the loop would sleep with this post unflushed (a tcp send
  // left in the provider's buffer, an io_uring SQE never submitted) until some
  // unrelated event woke it.
  void Arm() {
    if (handle_ == nullptr) return;
    uv_idle_start(idle_, [](uv_idle_t*) {});
    if (armed_) return;
    armed_ = true;
    uv_prepare_start(handle_, &BeforeBlock::OnPrepare);
  }

  void Close() {
    if (handle_ == nullptr) return;
    uv_prepare_stop(handle_);
    uv_idle_stop(idle_);
    handle_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(handle_), [](uv_handle_t* h) { delete reinterpret_cast<uv_prepare_t*>(h); });
    uv_close(reinterpret_cast<uv_handle_t*>(idle_), [](uv_handle_t* h) { delete reinterpret_cast<uv_idle_t*>(h); });
    handle_ = nullptr;
    idle_ = nullptr;
    armed_ = false;
  }

 private:
  static void OnPrepare(uv_prepare_t* h) {
    auto* self = static_cast<BeforeBlock*>(h->data);
    if (self == nullptr) return;
    self->armed_ = false;
    uv_prepare_stop(h);
    uv_idle_stop(self->idle_);
    self->fn_();
  }

  uv_prepare_t* handle_ = nullptr;
  uv_idle_t* idle_ = nullptr;
  bool armed_ = false;
  std::function<void()> fn_;
};

}  // namespace rblk
