// Page-aligned memory, registered once with fi_mr_reg and seen by JS as a
// Buffer (docs/architecture.md "Memory"). The pages live as long as either the
// registration or a JS view of them does: Memory is shared by both and freed
// when the last one lets go, so a Buffer kept past close() can never point at
// unmapped memory, and an in-flight operation never loses its pages.
#pragma once
#include <napi.h>
#include <rdma/fi_domain.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace rblk {

struct RemoteRegions;

struct Memory {
  void* base = nullptr;
  size_t size = 0;
  // Atomic: a reactor thread (reactor.h) releases the pages of the ops it completes.
  std::atomic<int> refs{0};
  void Retain() { refs.fetch_add(1, std::memory_order_relaxed); }
  void Release();
};

// The end of an orphan (ring-orphan.cc, fast-rbd.cc): once the kernel or
// librbd has finished with them, the pages it held are released, then its
// `settled` runs, once.
inline void ReleaseAndSettle(Memory*& pages, std::function<void()>& settled) {
  if (pages != nullptr) pages->Release();
  pages = nullptr;
  if (settled) {
    std::function<void()> run = std::move(settled);
    settled = nullptr;
    run();
  }
}

// Pages that belong to no domain: a session's zero-copy buffer, registered
// again on each connection that carries its I/O (docs/architecture.md
// "Memory"). A registration holds the pages as a
// MemoryRegion does, but never detaches the view: only Free() does, when
// the owner gives the memory up.
class Pages : public Napi::ObjectWrap<Pages> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Pages(const Napi::CallbackInfo& info);
  ~Pages() override;
  // Null once freed.
  Memory* memory() const { return memory_; }
  size_t size() const { return size_; }

 private:
  Napi::Value Buffer(const Napi::CallbackInfo& info);
  Napi::Value Free(const Napi::CallbackInfo& info);
  void Drop();

  Memory* memory_ = nullptr;
  size_t size_ = 0;
  Napi::Reference<Napi::Buffer<uint8_t>> buffer_ref_;
};

class MemoryRegion : public Napi::ObjectWrap<MemoryRegion> {
 public:
  static Napi::Function Init(Napi::Env env);
  static MemoryRegion* FromValue(Napi::Env env, Napi::Value v, const char* op);
  explicit MemoryRegion(const Napi::CallbackInfo& info);
  ~MemoryRegion() override;

  bool closed() const { return mr_ == nullptr; }
  uint8_t* data() const { return static_cast<uint8_t*>(memory_->base); }
  size_t size() const { return size_; }
  void* desc() const { return desc_; }
  Memory* memory() const { return memory_; }
  // Throws unless [offset, offset+length) lies inside the region.
  void CheckRange(Napi::Env env, double offset, double length, const char* op) const;
  // The local bytes behind [address, address + length) as a peer would name
  // them (remote base + offset), or null when they are not all in this region.
  const uint8_t* LocalBytes(uint64_t address, size_t length) const;

 private:
  Napi::Value Buffer(const Napi::CallbackInfo& info);
  Napi::Value Key(const Napi::CallbackInfo& info);
  Napi::Value RemoteBase(const Napi::CallbackInfo& info);
  Napi::Value Size(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  void Deregister();

  Memory* memory_ = nullptr;
  size_t size_ = 0;
  fid_mr* mr_ = nullptr;
  void* desc_ = nullptr;
  uint64_t key_ = 0;
  uint64_t remote_base_ = 0;
  std::shared_ptr<RemoteRegions> listed_in_;  // the domain's remote regions, while they list this one
  Napi::ObjectReference domain_ref_;
  Napi::Reference<Napi::Buffer<uint8_t>> buffer_ref_;
};

}  // namespace rblk
