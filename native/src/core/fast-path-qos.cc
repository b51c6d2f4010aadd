// The fast path's side of QoS (docs/architecture.md "QoS buckets"): taking
// the buckets JS publishes with a LUN's record, and holding the commands that
// have no room yet. Apart from fast-path.cc, which is long enough; the charge
// itself is in qos-bucket.h.
//
// A READ or WRITE the fast path would take but whose limits have no room is
// parked: it takes its slot (so its credit and tag) as any taken command,
// its receive goes back, and it waits in its LUN's FIFO. One timerfd per
// connection, armed for the earliest time the head of any FIFO may start
// (the latest TAT - burst of its limits, qos-bucket.h QosReadyAt), wakes the
// fast path where the ring's eventfd would (the JS loop's uv_poll, or the
// connection's reactor), and the heads whose limits have room then start as
// any fast-path command: no crossing into JavaScript per command, and no
// JavaScript timer. A parked command is charged when it starts, from the time
// it arrived, so a reload's new limits apply to it and its wait does not
// slow the rate; the timer looks again at least every kQosLookNs so that a
// limit raised or removed by a reload is seen without waiting out the old one.
// Beyond max_parked_ (the qosPark option) a command without room goes to
// JavaScript as before (stats.qosDeferred), which waits on a timer.
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

#include "endpoint.h"
#include "errors.h"
#include "fast-path.h"
#include "qos-bucket.h"

namespace rblk {

namespace {
// While anything is parked the timer fires at least this often (a reload's limits apply within it).
constexpr int64_t kQosLookNs = 50'000'000;
// And at most this often: at a rate above one command per kQosBatchNs, one
// wake-up starts every command whose turn has come since the last, and their
// I/O, RDMA and answers go out together (one io_uring_enter, one CQ drain)
// instead of one loop turn each. A command's start moves by at most this;
// the rate does not, since each is charged from its arrival (qos-bucket.h).
constexpr int64_t kQosBatchNs = 2'000'000;

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
}  // namespace

// record.qos: an array of BigInt64Arrays, each one QoS bucket's state
// (qos-bucket.h); absent or empty, the LUN is not limited here.
void FastPath::SetQos(Napi::Env env, Lun& lun, Napi::Value qos) {
  std::vector<int64_t*> states;
  std::vector<Napi::ObjectReference> refs;
  if (!qos.IsUndefined() && !qos.IsNull()) {
    if (!qos.IsArray()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FastPath.setLun", "qos must be an array of BigInt64Array");
    Napi::Array a = qos.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); i++) {
      Napi::Value v = a.Get(i);
      napi_typedarray_type type;
      size_t length = 0;
      void* data = nullptr;
      if (!v.IsTypedArray() || napi_get_typedarray_info(env, v, &type, &length, &data, nullptr, nullptr) != napi_ok ||
          type != napi_bigint64_array || length < kQosStateWords || data == nullptr)
        throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, "FastPath.setLun", "each qos entry must be a BigInt64Array of a QoS bucket's state");
      states.push_back(static_cast<int64_t*>(data));
      refs.push_back(Napi::Persistent(v.As<Napi::Object>()));
    }
  }
  // A parked command of this LUN is charged to the record's buckets when it
  // starts; JS republishes the same arrays (a reload changes them in place).
  lun.qos = std::move(states);
  lun.qos_refs = std::move(refs);
}

FastPath::QosVerdict FastPath::QosAdmit(Lun& lun, bool write, uint64_t bytes, uint64_t now_ns) {
  // Behind a parked command of the same LUN its turn comes first (FIFO per LUN, so per bucket).
  if (lun.parked.empty() && QosTryCharge(lun.qos.data(), lun.qos.size(), write, bytes, static_cast<int64_t>(now_ns))) return QosVerdict::kRun;
  if (parked_ < max_parked_ && qos_timer_fd_ >= 0) return QosVerdict::kPark;
  qos_deferred_++;
  return QosVerdict::kDefer;
}

void FastPath::Park(uint32_t slot) {
  Cmd& cmd = cmds_[slot];
  cmd.stage = Stage::kParked;
  luns_[cmd.lun].parked.push_back(slot);
  parked_++;
  qos_parked_++;
  ArmQosTimer();
}

int FastPath::OpenQosTimer(uv_loop_t* loop) {
  int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) return -errno;
  if (qos_poller_.Start(loop, fd, [this]() { OnQosTimer(); }) != 0) {
    close(fd);
    return -EIO;
  }
  qos_poller_.SetRef(false);  // as the ring's: the endpoint keeps the loop alive
  qos_timer_fd_ = fd;
  return 0;
}

// After the reactor has let go of the fd (Shutdown detaches first).
void FastPath::CloseQosTimer() {
  qos_poller_.Stop();
  if (qos_timer_fd_ >= 0) close(qos_timer_fd_);
  qos_timer_fd_ = -1;
  qos_timer_at_ = 0;
}

// For the earliest head of the LUNs' FIFOs, or disarmed when nothing is parked.
void FastPath::ArmQosTimer() {
  if (qos_timer_fd_ < 0) return;
  int64_t at = INT64_MAX;
  for (auto& entry : luns_) {
    Lun& lun = entry.second;
    if (lun.parked.empty()) continue;
    int64_t ready = lun.qos.empty() ? INT64_MIN : QosReadyAt(lun.qos.data(), lun.qos.size(), cmds_[lun.parked.front()].write);
    if (ready < at) at = ready;
  }
  if (at == INT64_MAX) {
    if (qos_timer_at_ == 0) return;
    at = 0;  // disarms
  } else {
    int64_t look = MonotonicNs() + kQosLookNs;
    if (at > look) at = look;
    if (at < qos_woke_at_ + kQosBatchNs) at = qos_woke_at_ + kQosBatchNs;
    if (at <= 0) at = 1;  // already due: fires at once (0 would disarm)
    if (at == qos_timer_at_) return;
  }
  itimerspec t{};
  t.it_value.tv_sec = at / 1000000000;
  t.it_value.tv_nsec = at % 1000000000;
  if (timerfd_settime(qos_timer_fd_, TFD_TIMER_ABSTIME, &t, nullptr) == 0) qos_timer_at_ = at;
}

// The JS loop's uv_poll, or the reactor (Endpoint::OnReactorEvents, lock held).
void FastPath::OnQosTimer() {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  if (qos_timer_fd_ < 0) return;
  uint64_t expirations = 0;
  ssize_t n = read(qos_timer_fd_, &expirations, sizeof expirations);
  (void)n;  // EAGAIN: another look already ran it
  qos_timer_at_ = 0;  // a one-shot timer that fired is disarmed
  qos_woke_at_ = MonotonicNs();
  ReleaseParked();
}

void FastPath::ReleaseParked() {
  if (closed_ || endpoint_ == nullptr || parked_ == 0) {
    ArmQosTimer();
    return;
  }
  int64_t now = MonotonicNs();
  // The heads with room first, each LUN's in order; then they start. A start
  // may call into JS (a failed post, off a reactor), which may close this
  // fast path or publish a LUN: the slots are collected before, and each is
  // checked to be still parked before it starts.
  std::vector<uint32_t> ready;
  for (auto& entry : luns_) {
    Lun& lun = entry.second;
    while (!lun.parked.empty()) {
      uint32_t slot = lun.parked.front();
      Cmd& cmd = cmds_[slot];
      if (!lun.qos.empty() &&
          !QosTryCharge(lun.qos.data(), lun.qos.size(), cmd.write, cmd.length, now, static_cast<int64_t>(cmd.started_ns)))
        break;
      lun.parked.pop_front();
      parked_--;
      ready.push_back(slot);
    }
  }
  for (uint32_t slot : ready) {
    if (closed_ || endpoint_ == nullptr) break;
    if (cmds_[slot].stage != Stage::kParked) continue;
    qos_released_++;
    // For the volume's throttled counters (rblkd ctl volumes, the metrics), through takeCounts.
    Counts& k = counts_[cmds_[slot].lun];
    k.qos_waited++;
    k.qos_wait_seconds += static_cast<double>(now - static_cast<int64_t>(cmds_[slot].started_ns)) / 1e9;
    Begin(slot);
  }
  if (closed_) return;
  if (!ready.empty()) {
    AfterDrain();  // the I/O queued above, in one io_uring_enter
    if (endpoint_ != nullptr) endpoint_->before_block_.Arm();  // the posts above: progress before the loop sleeps
  }
  ArmQosTimer();
}

// revoke(lun): no command may start on the LUN once revoke returns (a hold
// for task management, a fence, a drain, a removal, a reservation), and JS then
// waits for the ones running (idle). A parked command is already the fast
// path's: it starts now, charged from its arrival (the buckets carry the debt
// to the commands after it), rather than after the revoke, and the wait for
// idle is the few milliseconds of its I/O rather than its turn at a low
// limit; as a closing volume lets JavaScript's waits go on at once
// (target/scsi/qos.ts close). At most the parked commands (32) pass early.
void FastPath::FlushParked(uint32_t n) {
  auto it = luns_.find(n);
  if (it == luns_.end() || it->second.parked.empty() || closed_ || endpoint_ == nullptr) return;
  Lun& lun = it->second;
  std::vector<uint32_t> ready(lun.parked.begin(), lun.parked.end());
  lun.parked.clear();
  parked_ -= static_cast<uint32_t>(ready.size());
  int64_t now = MonotonicNs();
  for (uint32_t slot : ready) {
    if (closed_ || endpoint_ == nullptr) break;
    Cmd& cmd = cmds_[slot];
    if (cmd.stage != Stage::kParked) continue;
    if (!lun.qos.empty()) QosCharge(lun.qos.data(), lun.qos.size(), cmd.write, cmd.length, static_cast<int64_t>(cmd.started_ns));
    qos_released_++;
    Counts& k = counts_[cmd.lun];
    k.qos_waited++;
    k.qos_wait_seconds += static_cast<double>(now - static_cast<int64_t>(cmd.started_ns)) / 1e9;
    Begin(slot);
  }
  if (closed_) return;
  AfterDrain();
  if (endpoint_ != nullptr) endpoint_->AfterPost();  // on the JS thread: the reactor (or the loop) runs progress
  ArmQosTimer();
}

// Every parked command ends here unrun: its slot, credit and LUN count come
// back once (Finish); nothing of it is in the CQ, the ring or librbd, and its
// receive was reposted when it was taken.
size_t FastPath::DropParked() {
  for (auto& entry : luns_) entry.second.parked.clear();
  parked_ = 0;
  size_t n = 0;
  for (uint32_t i = 0; i < cmds_.size(); ++i) {
    if (cmds_[i].stage != Stage::kParked) continue;
    cmds_[i].pending = 0;
    Finish(i);
    n++;
  }
  ArmQosTimer();  // disarms
  return n;
}

// dropParked(): the connection is closing (target/rblk/connection.ts): its
// parked commands end unrun rather than start as its LUNs are revoked.
Napi::Value FastPath::DropParkedJs(const Napi::CallbackInfo& info) {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  return Napi::Number::New(info.Env(), static_cast<double>(closed_ ? 0 : DropParked()));
}

}  // namespace rblk
