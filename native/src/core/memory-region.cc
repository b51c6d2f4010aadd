#include "memory-region.h"

#include <rdma/fi_errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "addon-data.h"
#include "domain.h"
#include "endpoint.h"
#include "errors.h"

namespace rblk {

void Memory::Release() {
  if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    munmap(base, size);
    delete this;
  }
}

Napi::Function MemoryRegion::Init(Napi::Env env) {
  return DefineClass(env, "MemoryRegion",
                     {InstanceAccessor<&MemoryRegion::Buffer>("buffer"), InstanceAccessor<&MemoryRegion::Key>("key"),
                      InstanceAccessor<&MemoryRegion::RemoteBase>("remoteBase"),
                      InstanceAccessor<&MemoryRegion::Size>("size"), InstanceMethod<&MemoryRegion::Close>("close")});
}

MemoryRegion* MemoryRegion::FromValue(Napi::Env env, Napi::Value v, const char* op) {
  auto* mr = UnwrapAs<MemoryRegion>(env, v, &AddonData::memory_region, "MemoryRegion", op);
  if (mr->closed()) throw MakeUsageError(env, "ERR_CLOSED", EBADF, op, "the memory region is closed");
  return mr;
}

namespace {
// Page-aligned anonymous memory of `info[1]` bytes, with one reference.
Memory* MapPages(Napi::Env env, const Napi::Value& v, const char* op, size_t* size) {
  if (!v.IsNumber()) throw MakeUsageError(env, "ERR_INVALID_ARG_TYPE", EINVAL, op, "size must be a number");
  double want = v.As<Napi::Number>().DoubleValue();
  if (!(want >= 1 && want <= (1ull << 40)) || want != static_cast<double>(static_cast<uint64_t>(want)))
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", EINVAL, op, "size must be an integer from 1 byte to 1 TiB");
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  *size = static_cast<size_t>(want);
  size_t mapped = (*size + page - 1) / page * page;
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw MakeError(env, errno, "mmap", false);
  return new Memory{base, mapped, 1};
}

// A Buffer over the pages that holds its own reference to them.
Napi::Buffer<uint8_t> ViewOf(Napi::Env env, Memory* mem, size_t size) {
  mem->Retain();
  return Napi::Buffer<uint8_t>::New(env, static_cast<uint8_t*>(mem->base), size, [mem](Napi::Env, uint8_t*) { mem->Release(); });
}
}  // namespace

Napi::Function Pages::Init(Napi::Env env) {
  return DefineClass(env, "Pages", {InstanceAccessor<&Pages::Buffer>("buffer"), InstanceMethod<&Pages::Free>("free")});
}

// new Pages(size)
Pages::Pages(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Pages>(info) {
  memory_ = MapPages(info.Env(), info[0], "mmap", &size_);
  buffer_ref_ = Napi::Persistent(ViewOf(info.Env(), memory_, size_));
}

Pages::~Pages() { Drop(); }

void Pages::Drop() {
  if (memory_ != nullptr) {
    memory_->Release();
    memory_ = nullptr;
  }
  buffer_ref_.Reset();
}

Napi::Value Pages::Buffer(const Napi::CallbackInfo& info) {
  if (buffer_ref_.IsEmpty()) return Napi::Buffer<uint8_t>::New(info.Env(), 0);
  return buffer_ref_.Value();
}

// Detaches the view (it reads as empty afterwards) and gives up this object's
// reference; registrations and in-flight operations keep theirs until they end.
Napi::Value Pages::Free(const Napi::CallbackInfo& info) {
  if (!buffer_ref_.IsEmpty()) {
    Napi::ArrayBuffer ab = buffer_ref_.Value().ArrayBuffer();
    if (!ab.IsDetached()) ab.Detach();
  }
  Drop();
  return info.Env().Undefined();
}

// new MemoryRegion(domain, size | pages, remoteAccess, endpoint|null). Given
// Pages, it registers those (they outlive the registration, and its close
// leaves their view alone); given a size, it maps its own.
MemoryRegion::MemoryRegion(const Napi::CallbackInfo& info) : Napi::ObjectWrap<MemoryRegion>(info) {
  Napi::Env env = info.Env();
  Domain* domain = UnwrapAs<Domain>(env, info[0], &AddonData::domain, "Domain", "fi_mr_reg");
  domain->CheckOpen(env, "fi_mr_reg");
  bool remote = info[2].IsBoolean() && info[2].As<Napi::Boolean>().Value();
  bool own = !info[1].IsObject();
  if (own) {
    memory_ = MapPages(env, info[1], "fi_mr_reg", &size_);
  } else {
    Pages* pages = UnwrapAs<Pages>(env, info[1], &AddonData::pages, "Pages", "fi_mr_reg");
    if (pages->memory() == nullptr) throw MakeUsageError(env, "ERR_CLOSED", EBADF, "fi_mr_reg", "the pages were freed");
    memory_ = pages->memory();
    memory_->Retain();
    size_ = pages->size();
  }
  void* base = memory_->base;

  // Local access always; remote read/write only for an initiator's I/O pool
  // (the target's pool is local-only, so no peer can RDMA into target memory).
  uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
  if (remote) access |= FI_REMOTE_READ | FI_REMOTE_WRITE;
  int rc = fi_mr_reg(domain->domain(), base, size_, access, 0, domain->NextKey(), 0, &mr_, nullptr);
  if (rc != 0) {
    mr_ = nullptr;
    memory_->Release();
    memory_ = nullptr;
    throw MakeError(env, -rc, "fi_mr_reg");
  }
  if (domain->mr_mode() & FI_MR_ENDPOINT) {
    if (!info[3].IsObject()) {
      Deregister();
      throw MakeUsageError(env, "FI_EINVAL", EINVAL, "fi_mr_bind",
                           "this provider needs FI_MR_ENDPOINT: register memory for a specific endpoint");
    }
    Endpoint* ep = UnwrapAs<Endpoint>(env, info[3], &AddonData::endpoint, "Endpoint", "fi_mr_bind");
    rc = ep->BindMemory(mr_);
    if (rc != 0) {
      Deregister();
      throw MakeError(env, -rc, "fi_mr_bind");
    }
  }
  desc_ = fi_mr_desc(mr_);
  key_ = fi_mr_key(mr_);
  remote_base_ = (domain->mr_mode() & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(base) : 0;
  domain_ref_ = Napi::Persistent(info[0].As<Napi::Object>());
  if (remote) {
    listed_in_ = domain->remote_regions();
    listed_in_->by_key[key_] = this;
  }

  // A region's own pages get a view here; registered Pages keep theirs.
  if (own) buffer_ref_ = Napi::Persistent(ViewOf(env, memory_, size_));
}

MemoryRegion::~MemoryRegion() { Deregister(); }

void MemoryRegion::Deregister() {
  if (listed_in_ != nullptr) {
    auto it = listed_in_->by_key.find(key_);
    if (it != listed_in_->by_key.end() && it->second == this) listed_in_->by_key.erase(it);
    listed_in_.reset();
  }
  if (mr_ != nullptr) {
    fi_close(&mr_->fid);
    mr_ = nullptr;
  }
  if (memory_ != nullptr) {
    memory_->Release();
    memory_ = nullptr;
  }
  buffer_ref_.Reset();
  domain_ref_.Reset();
}

void MemoryRegion::CheckRange(Napi::Env env, double offset, double length, const char* op) const {
  // Checked separately so offset + length can never wrap.
  if (!(offset >= 0) || !(length >= 0) || offset != static_cast<double>(static_cast<uint64_t>(offset)) ||
      length != static_cast<double>(static_cast<uint64_t>(length)) || offset > static_cast<double>(size_) ||
      length > static_cast<double>(size_) - offset)
    throw MakeUsageError(env, "ERR_OUT_OF_RANGE", ERANGE, op,
                         "slice [" + std::to_string(static_cast<int64_t>(offset)) + ", +" +
                             std::to_string(static_cast<int64_t>(length)) + ") is outside the " +
                             std::to_string(size_) + "-byte memory region");
}

const uint8_t* MemoryRegion::LocalBytes(uint64_t address, size_t length) const {
  if (mr_ == nullptr || address < remote_base_) return nullptr;
  uint64_t offset = address - remote_base_;
  // Checked separately so offset + length can never wrap.
  if (offset > size_ || length > size_ - offset) return nullptr;
  return static_cast<const uint8_t*>(memory_->base) + offset;
}

Napi::Value MemoryRegion::Buffer(const Napi::CallbackInfo& info) {
  if (buffer_ref_.IsEmpty()) return Napi::Buffer<uint8_t>::New(info.Env(), 0);
  return buffer_ref_.Value();
}

Napi::Value MemoryRegion::Key(const Napi::CallbackInfo& info) { return Napi::BigInt::New(info.Env(), key_); }
Napi::Value MemoryRegion::RemoteBase(const Napi::CallbackInfo& info) {
  return Napi::BigInt::New(info.Env(), remote_base_);
}
Napi::Value MemoryRegion::Size(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(size_));
}

// Detaches every JS view (they read as empty afterwards), then deregisters.
// The caller (native/fabric.ts) waits for in-flight operations first.
Napi::Value MemoryRegion::Close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (mr_ == nullptr) throw MakeUsageError(env, "ERR_CLOSED", EBADF, "MemoryRegion.close", "already closed");
  if (!buffer_ref_.IsEmpty()) {
    Napi::ArrayBuffer ab = buffer_ref_.Value().ArrayBuffer();
    if (!ab.IsDetached()) ab.Detach();
  }
  Deregister();
  return env.Undefined();
}

}  // namespace rblk
