// Watches a libfabric wait fd (FI_WAIT_FD, fi_control(FI_GETWAIT)) on the
// libuv loop, so an idle queue costs no CPU (DESIGN.md "Completions reach JS
// through libuv"). The uv handle outlives this object until its close callback.
#pragma once
#include <uv.h>

#include <functional>

namespace rblk {

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
