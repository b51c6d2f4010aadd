// QoS buckets as the fast path charges them (docs/architecture.md "QoS
// buckets"; docs/operations.md "QoS limits"). JavaScript owns the memory (a
// BigInt64Array per bucket, target/scsi/qos-bucket.ts, which documents the
// layout and the algorithm) and changes the limits in place on a reload; the
// fast path only reads the limits and moves the per-limit "theoretical arrival
// time" forward with compare-and-swap, on whichever thread serves the
// connection, without calling into JavaScript. It knows nothing of volumes or
// initiators: a command is a direction and a byte count.
//
// A command that may not start yet waits on the fast path, parked in a FIFO
// per LUN until its limits let it start (fast-path-qos.cc); beyond the parked
// bound it is not the fast path's (TryReceive says "not mine") and goes up to
// JavaScript, which charges the same buckets and waits for its turn. Nothing
// is failed for want of tokens.
#pragma once

#include <climits>
#include <cstdint>

namespace rblk {

constexpr int kQosSlots = 6;  // read_iops, write_iops, iops, read_bps, write_bps, bps
constexpr int kQosWords = 3;  // rate per second (0: none), burst ns, TAT ns
constexpr int kQosIopsSlots = 3;
constexpr size_t kQosStateWords = kQosSlots * kQosWords;

inline bool QosApplies(int slot, bool write) {
  // read: read_iops, iops, read_bps, bps; write: write_iops, iops, write_bps, bps.
  int k = slot % kQosIopsSlots;
  return k == 2 || k == (write ? 1 : 0);
}

// Calls f(limit, k, rate) for each limit of these buckets that applies to a
// command of this direction and has a rate (0: no limit); limit points at the
// limit's words (rate, burst, TAT).
template <typename F>
inline void QosEachLimit(int64_t* const* states, size_t n, bool write, F&& f) {
  for (size_t b = 0; b < n; b++) {
    for (int k = 0; k < kQosSlots; k++) {
      if (!QosApplies(k, write)) continue;
      int64_t* limit = &states[b][k * kQosWords];
      int64_t rate = __atomic_load_n(&limit[0], __ATOMIC_RELAXED);
      if (rate > 0) f(limit, k, rate);
    }
  }
}

// The earliest time every limit of these buckets lets a command of this
// direction start (the latest TAT - burst among them), as things stand; a
// limit set, raised or removed by a reload is seen at the next look.
inline int64_t QosReadyAt(int64_t* const* states, size_t n, bool write) {
  int64_t at = INT64_MIN;
  QosEachLimit(states, n, write, [&](int64_t* limit, int, int64_t) {
    int64_t ready = __atomic_load_n(&limit[2], __ATOMIC_ACQUIRE) - __atomic_load_n(&limit[1], __ATOMIC_RELAXED);
    if (ready > at) at = ready;
  });
  return at;
}

// Whether every limit of these buckets lets a command start at now_ns.
inline bool QosHasRoom(int64_t* const* states, size_t n, bool write, int64_t now_ns) {
  return QosReadyAt(states, n, write) <= now_ns;
}

// Charges a command to every limit of these buckets that applies to it.
// from_ns is when the command arrived: a parked command that has waited since
// before a limit's TAT takes the next free time (TAT + cost), as JavaScript's
// reserve does, instead of now + cost, which would lose the wake-up's latency
// from the rate at every release.
inline void QosCharge(int64_t* const* states, size_t n, bool write, uint64_t bytes, int64_t from_ns) {
  QosEachLimit(states, n, write, [&](int64_t* limit, int k, int64_t rate) {
    uint64_t units = k < kQosIopsSlots ? 1 : bytes;
    int64_t cost = static_cast<int64_t>(units * 1000000000ull / static_cast<uint64_t>(rate));
    int64_t* tat = &limit[2];
    int64_t seen = __atomic_load_n(tat, __ATOMIC_ACQUIRE);
    for (;;) {
      int64_t next = (seen > from_ns ? seen : from_ns) + cost;
      if (__atomic_compare_exchange_n(tat, &seen, next, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) break;
    }
  });
}

// Whether every limit lets the command start at now_ns; if so, charges it.
// Between the check and the charge another thread may charge too: at most
// the commands racing here pass together, as a burst does.
inline bool QosTryCharge(int64_t* const* states, size_t n, bool write, uint64_t bytes, int64_t now_ns, int64_t from_ns) {
  if (!QosHasRoom(states, n, write, now_ns)) return false;
  QosCharge(states, n, write, bytes, from_ns);
  return true;
}

inline bool QosTryCharge(int64_t* const* states, size_t n, bool write, uint64_t bytes, int64_t now_ns) {
  return QosTryCharge(states, n, write, bytes, now_ns, now_ns);
}

}  // namespace rblk
