// A libfabric event queue (connection management: FI_CONNREQ, FI_CONNECTED,
// FI_SHUTDOWN, errors) opened with FI_WAIT_FD and watched on the libuv loop.
// Each event becomes a plain JS object handed to the owner's callback.
#pragma once
#include <napi.h>
#include <rdma/fi_eq.h>

#include <functional>

#include "poller.h"

namespace rblk {

class EventQueue {
 public:
  // Returns 0 or a negative libfabric error; op names the failing call.
  int Open(fid_fabric* fabric, uv_loop_t* loop, std::function<void()> on_readable, const char** op);
  // Reads one event: returns 1 and fills *out, 0 when empty. FI_CONNREQ's
  // fi_info is handed over through *connreq (the caller owns it).
  int Read(Napi::Env env, Napi::Object* out, fi_info** connreq);
  bool TryWait(fid_fabric* fabric);
  // Stops watching the fd: first step of a close, before the owner closes the
  // endpoint bound to this queue (which must go before the queue itself).
  void StopPolling() { poller_.Stop(); }
  // Closes the queue; call it after whatever was bound to it is closed.
  void Close();
  fid_eq* eq() const { return eq_; }

 private:
  fid_eq* eq_ = nullptr;
  FdPoller poller_;
};

}  // namespace rblk
