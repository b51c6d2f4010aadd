// FI_EP_RDM endpoints (docs/transport.md "RDM endpoints"). An RDM endpoint
// has no connection and no event queue: peers are entries of an address
// vector. rblk keeps its one-connection-one-endpoint model on top of that: a
// listening endpoint at a well-known address (address:port, or for shm a name
// derived from them) takes connection requests, and each accepted peer gets an
// endpoint of its own whose address vector holds that one peer. The JS layers
// above see the same Endpoint they see over MSG, with the same events
// (connreq, connected, shutdown, error), which here come from a small
// handshake over tagged messages (docs/protocol.md "RDM endpoints") that
// never meets the untagged capsules.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "addon-data.h"
#include "args.h"
#include "domain.h"
#include "endpoint.h"
#include "errors.h"

namespace rblk {

namespace {
// docs/protocol.md "RDM endpoints": every handshake message is one tagged
// message with this tag, a 16-byte header, the sender's endpoint name, then
// private data.
constexpr uint64_t kCmTag = 0x52424b434dull;  // "RBKCM"
constexpr uint32_t kCmMagic = 0x4d434252u;    // "RBCM" little-endian
constexpr uint8_t kCmVersion = 1;
constexpr uint8_t kCmRequest = 1, kCmAccept = 2, kCmReject = 3, kCmShutdown = 4;
constexpr size_t kCmHeader = 16;
constexpr size_t kCmMaxName = 256;
constexpr size_t kCmMaxData = 256;
constexpr size_t kCmSize = kCmHeader + kCmMaxName + kCmMaxData;
constexpr size_t kCmReceivesListening = 16;
constexpr size_t kCmReceives = 2;
// The poll timer of a CQ without a wait fd: back to back for this long after
// the last completion or post, then every kIdlePollMs, then every kSleepPollMs
// once idle for kSleepAfterNs (docs/transport.md "Progress without a wait fd").
constexpr uint64_t kBusyWindowNs = 2'000'000;
// With a doorbell to the peer there is no back-to-back window: one pass after
// each post (to ring the peer), then the peer's rings wake the loop. Spinning
// bought nothing on the shared 2-core machine: both processes spun and took
// each other's time slices (docs/performance.md "RDM endpoints").
constexpr uint64_t kBellWindowNs = 0;
constexpr uint64_t kIdlePollMs = 1;
constexpr uint64_t kSleepAfterNs = 1'000'000'000;
constexpr uint64_t kSleepPollMs = 10;

// The shm endpoints open in this process, by name. libfabric 1.17's shm
// reaches a peer in the same process through that endpoint's own region, not
// a mapping of its own, so a send after the peer's close touches freed
// memory; each endpoint therefore checks its local peer's flag before it posts
// (Endpoint::PeerGone). Peers in other processes have their own mapping and
// need none of this (docs/transport.md "RDM endpoints").
std::mutex g_local_mu;
std::unordered_map<std::string, std::weak_ptr<std::atomic<bool>>>& LocalShm() {
  static auto* m = new std::unordered_map<std::string, std::weak_ptr<std::atomic<bool>>>();
  return *m;
}

// Names of shm listeners this process has closed (until a listener takes the
// name again): connecting to one is refused here, before libfabric 1.17's shm
// could look the name up among this process's endpoints (test/native/rdm.test.ts
// "connecting where nobody listens").
std::unordered_set<std::string>& ClosedShmListeners() {
  static auto* s = new std::unordered_set<std::string>();
  return *s;
}

std::string NameKey(const uint8_t* name, size_t len) {
  size_t n = 0;
  while (n < len && name[n] != 0) ++n;
  return std::string(reinterpret_cast<const char*>(name), n);
}

// The doorbell of an shm endpoint: an abstract-namespace unix datagram socket
// named after the endpoint's shm name (docs/transport.md "Progress without a
// wait fd"). Abstract names vanish with their process: a crash leaves nothing.
// A ring is one byte: kBellAnswer asks the peer to ring back after it has run
// its progress once (the ringer posted something whose completion needs that
// progress, e.g. an RMA write's delivery-complete); kBellPlain does not.
constexpr char kBellPrefix[] = "rblk-shm-bell:";
constexpr uint8_t kBellPlain = 0, kBellAnswer = 1;

std::vector<uint8_t> BellAddress(const std::string& name) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string path = std::string(kBellPrefix) + name;
  size_t n = std::min(path.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, path.data(), n);  // sun_path[0] == 0: abstract
  const size_t len = offsetof(sockaddr_un, sun_path) + 1 + n;
  const auto* b = reinterpret_cast<const uint8_t*>(&a);
  return std::vector<uint8_t>(b, b + len);
}

uint64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The shm name a listener at address:port takes: the address with anything
// but letters, digits and dots made '_' (an IPv6 address's colons would read
// as the provider's own separators); docs/transport.md "RDM endpoints".
std::string ShmName(const std::string& address, int port) {
  // A listener on every address is named for the loopback one: shm reaches
  // only this host, and 127.0.0.1 is the address every process here can use.
  std::string a = address == "0.0.0.0" || address == "::" || address.empty() ? "127.0.0.1" : address;
  for (char& c : a)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.')) c = '_';
  return "fi_shm://rblk_" + a + "_" + std::to_string(port);
}

// "address:port" of a socket-address endpoint name, else the name as text
// when it is printable (shm), else "".
std::string NameText(const uint8_t* name, size_t len) {
  if (len >= sizeof(sockaddr_in) && reinterpret_cast<const sockaddr*>(name)->sa_family == AF_INET) {
    sockaddr_in in;
    std::memcpy(&in, name, sizeof(in));
    char host[INET_ADDRSTRLEN] = {0};
    if (inet_ntop(AF_INET, &in.sin_addr, host, sizeof(host)) == nullptr) return "";
    return std::string(host) + ":" + std::to_string(ntohs(in.sin_port));
  }
  if (len >= sizeof(sockaddr_in6) && reinterpret_cast<const sockaddr*>(name)->sa_family == AF_INET6) {
    sockaddr_in6 in6;
    std::memcpy(&in6, name, sizeof(in6));
    char host[INET6_ADDRSTRLEN] = {0};
    if (inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof(host)) == nullptr) return "";
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6.sin6_port));
  }
  std::string s;
  for (size_t i = 0; i < len && name[i] != 0; ++i) {
    if (name[i] < 0x20 || name[i] > 0x7e) return "";
    s.push_back(static_cast<char>(name[i]));
  }
  return s;
}

// Holds address:port in the TCP port space for an shm listener, so that port 0
// picks a free number and two listeners never take one name. Returns the fd
// (kept open for the listener's life) and sets *port, or -errno.
int ReservePort(const std::string& address, int want, int* port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, address.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(want));
    len = sizeof(*in);
  } else if (inet_pton(AF_INET6, address.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(want));
    len = sizeof(*in6);
  } else {
    return -EINVAL;
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  *port = ntohs(ss.ss_family == AF_INET ? in->sin_port : in6->sin6_port);
  return fd;
}
// Accepted shm endpoints are named after their listener, `<listener name>.<n>`,
// so that what a killed rblkd leaves in /dev/shm is known to be rblk's and
// whose (CleanStaleRegions).
uint64_t g_accepted_seq = 0;

// Removes the shm regions (/dev/shm/rblk_<address>_<port>[.<n>]) of listeners
// that are gone: a killed rblkd's listener and the endpoints it had accepted.
// A live shm listener holds its address:port in the TCP port space
// (ReservePort), so a region whose address:port binds has no owner; it is
// unlinked while the port is held, so no new listener can take the name
// meanwhile. The caller holds held_address:held_port itself: those regions are
// stale too. libfabric unlinks its regions on close and on most signals, not
// on SIGKILL (docs/transport.md "RDM endpoints").
void CleanStaleRegions(const std::string& held_address, int held_port) {
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return;
  const std::string held = ShmName(held_address, held_port).substr(std::strlen("fi_shm://"));
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.compare(0, 5, "rblk_") != 0) continue;
    const size_t sep = n.rfind('_');
    const size_t dot = n.find('.', sep);
    const std::string base = n.substr(0, dot);
    const std::string digits = n.substr(sep + 1, dot == std::string::npos ? std::string::npos : dot - sep - 1);
    if (sep <= 5 || digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 5) continue;
    int fd = -1;
    if (base != held) {
      // The address as ShmName wrote it: IPv4 as is, IPv6 with its colons made '_'.
      std::string address = n.substr(5, sep - 5);
      in6_addr probe;
      if (inet_pton(AF_INET, address.c_str(), &probe) != 1) {
        for (char& c : address)
          if (c == '_') c = ':';
        if (inet_pton(AF_INET6, address.c_str(), &probe) != 1) continue;
      }
      int port = 0;
      fd = ReservePort(address, std::atoi(digits.c_str()), &port);
      if (fd < 0) continue;  // held: a live listener's (or not ours to judge)
    }
    unlink(("/dev/shm/" + n).c_str());
    if (fd >= 0) close(fd);
  }
  closedir(d);
}

// Connecting shm endpoints are named `rblk-i_<pid>_<n>` (libfabric's own
// default, `<pid>:<n>:<n>`, cannot be told from another program's), so what
// a killed initiator leaves in /dev/shm is known to be rblk's and whose.
constexpr char kInitiatorPrefix[] = "rblk-i_";
uint64_t g_connecting_seq = 0;

// Removes the regions of rblk initiators whose process is gone (kill(pid, 0):
// ESRCH). An initiator in another PID namespace that shares this /dev/shm
// would look gone too; its abstract doorbell would not reach this host's
// network namespace either (docs/transport.md "RDM endpoints").
void CleanStaleInitiatorRegions() {
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return;
  const size_t plen = std::strlen(kInitiatorPrefix);
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.compare(0, plen, kInitiatorPrefix) != 0) continue;
    const size_t sep = n.find('_', plen);
    const std::string pid = n.substr(plen, sep == std::string::npos ? std::string::npos : sep - plen);
    if (sep == std::string::npos || pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t p = static_cast<pid_t>(std::atoi(pid.c_str()));
    if (p <= 0 || p == getpid()) continue;
    if (kill(p, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to signal: alive
    unlink(("/dev/shm/" + n).c_str());
  }
  closedir(d);
}
}  // namespace

int Endpoint::OpenRdmQueues(fi_info* open_info, const char** op) {
  fi_cq_attr attr{};
  attr.size = open_info->tx_attr->size + open_info->rx_attr->size;
  attr.format = FI_CQ_FORMAT_DATA;
  attr.wait_obj = FI_WAIT_FD;
  *op = "fi_cq_open";
  int rc = fi_cq_open(domain_->domain(), &attr, &cq_, nullptr);
  if (rc == -FI_ENOSYS || rc == -FI_EINVAL) {
    // shm (libfabric 1.17) has no wait object: polled (StartPollTimer).
    attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(domain_->domain(), &attr, &cq_, nullptr);
  }
  if (rc != 0) {
    cq_ = nullptr;
    return rc;
  }
  if (attr.wait_obj == FI_WAIT_FD) {
    *op = "fi_control(FI_GETWAIT)";
    rc = fi_control(&cq_->fid, FI_GETWAIT, &cq_fd_);
    if (rc != 0) return rc;
  }
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = 4;
  *op = "fi_av_open";
  rc = fi_av_open(domain_->domain(), &av_attr, &av_, nullptr);
  if (rc != 0) av_ = nullptr;
  return rc;
}

void Endpoint::ConstructRdm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  rdm_ = true;
  peer_ = FI_ADDR_UNSPEC;
  listening_ = info.Length() > 7 && info[7].ToBoolean().Value();
  uv_loop_t* loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  loop_ = loop;
  std::string node = info[3].IsString() ? info[3].As<Napi::String>().Utf8Value() : "";
  std::string service = info[4].IsString() ? info[4].As<Napi::String>().Utf8Value() : "0";
  const bool shm = domain_->shm();

  Endpoint* listener = nullptr;
  std::vector<uint8_t> initiator_name;
  if (info[1].IsObject()) {
    listener = UnwrapAs<Endpoint>(env, info[1], &AddonData::endpoint, "listening Endpoint", "fi_endpoint");
    uint32_t id = ToU32(env, info[2], "fi_endpoint", "requestId");
    auto it = listener->requests_.find(id);
    if (!listener->listening_ || it == listener->requests_.end())
      throw MakeUsageError(env, "ERR_UNKNOWN_REQUEST", EINVAL, "fi_endpoint", "no such pending connection request");
    initiator_name = it->second;
  }

  // Which fi_info the endpoint opens with: a listener's is bound to
  // address:port (rxm) or named after them (shm); an accepted peer's endpoint
  // sits on its listener's address; a connecting one takes the address the
  // provider routes to the listener from.
  fi_info* open_info = nullptr;
  std::vector<uint8_t> listener_name;
  std::string shm_name;
  int rc = 0;
  std::string what;
  if (listening_) {
    if (shm) {
      int port = 0;
      const int want = std::atoi(service.c_str());
      address_ = node.empty() ? "127.0.0.1" : node;
      int fd = ReservePort(address_, want, &port);
      // A connecting shm endpoint probes the port for a moment (below): a
      // restart on a fixed port that meets such a probe tries again.
      for (int tries = 0; fd == -EADDRINUSE && want != 0 && tries < 5; ++tries) {
        usleep(2000);
        fd = ReservePort(address_, want, &port);
      }
      if (fd < 0) throw MakeError(env, -fd, "bind(" + node + ":" + service + ")");
      reserve_fd_ = fd;
      port_ = port;
      shm_name = ShmName(address_, port_);
      CleanStaleRegions(address_, port_);
      CleanStaleInitiatorRegions();
    } else {
      rc = domain_->GetInfo(node.empty() ? nullptr : node.c_str(), service.c_str(), FI_SOURCE, &info_);
      what = "fi_getinfo(" + node + ":" + service + ")";
    }
  } else if (listener != nullptr) {
    if (shm) shm_name = ShmName(listener->address_, listener->port_) + "." + std::to_string(++g_accepted_seq);
    if (!shm) {
      rc = domain_->GetInfo(listener->address_.c_str(), "0", FI_SOURCE, &info_);
      what = "fi_getinfo(" + listener->address_ + ":0)";
    }
  } else if (shm) {
    std::string name = ShmName(node, std::atoi(service.c_str()));
    {
      std::lock_guard<std::mutex> g(g_local_mu);
      if (ClosedShmListeners().count(name) != 0)
        throw MakeError(env, FI_ECONNREFUSED, "fi_av_insert(" + name + "): that listener, in this process, has closed");
    }
    // A live shm listener holds its address:port (ReservePort). If the port
    // binds, none is there, whatever region a killed one left under its name
    // in /dev/shm: refuse at once, as a TCP connect to a closed port is
    // refused, rather than send the request into a region nobody reads and
    // wait out the connect timeout (a session reconnecting while rblkd
    // restarts). An address this host cannot bind (not one of its own, or a
    // host name) is not probed.
    {
      int probe_port = 0;
      int probe = ReservePort(node, std::atoi(service.c_str()), &probe_port);
      if (probe >= 0) {
        close(probe);
        throw MakeError(env, FI_ECONNREFUSED, "fi_connect(" + name + "): no shm listener holds " + node + ":" + service);
      }
    }
    listener_name.assign(name.begin(), name.end());
    listener_name.push_back(0);
    listener_bell_ = BellAddress(name);
    CleanStaleInitiatorRegions();
    shm_name = std::string("fi_shm://") + kInitiatorPrefix + std::to_string(getpid()) + "_" + std::to_string(++g_connecting_seq);
  } else {
    rc = domain_->GetInfo(node.c_str(), service.c_str(), 0, &info_);
    what = "fi_getinfo(" + node + ":" + service + ")";
    if (rc == 0 && info_->dest_addr != nullptr) {
      const auto* d = static_cast<const uint8_t*>(info_->dest_addr);
      listener_name.assign(d, d + info_->dest_addrlen);
    }
  }
  if (rc != 0) {
    info_ = nullptr;
    TeardownRdm();
    throw MakeError(env, -rc, what);
  }
  // Every post reads its limits from info_ (inject size, iov limits), as on MSG.
  if (info_ == nullptr) info_ = fi_dupinfo(domain_->info());
  if (info_ == nullptr) {
    TeardownRdm();
    throw MakeError(env, FI_ENOMEM, "fi_dupinfo");
  }
  open_info = info_;

  const char* op = "";
  rc = OpenRdmQueues(open_info, &op);
  if (rc == 0) {
    op = "fi_endpoint";
    rc = fi_endpoint(domain_->domain(), open_info, &ep_, nullptr);
    if (rc != 0) ep_ = nullptr;
  }
  if (rc == 0) {
    op = "fi_ep_bind(cq)";
    rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV);
  }
  if (rc == 0) {
    op = "fi_ep_bind(av)";
    rc = fi_ep_bind(ep_, &av_->fid, 0);
  }
  if (rc == 0 && !shm_name.empty()) {
    op = "fi_setname";
    rc = fi_setname(&ep_->fid, const_cast<char*>(shm_name.c_str()), shm_name.size() + 1);
  }
  if (rc == 0) {
    op = "fi_enable";
    rc = fi_enable(ep_);
  }
  if (rc == 0) {
    op = "fi_getname";
    uint8_t name[kCmMaxName];
    size_t len = sizeof(name);
    rc = fi_getname(&ep_->fid, name, &len);
    if (rc == 0 && len > kCmMaxName) rc = -FI_ETOOSMALL;
    if (rc == 0) local_name_.assign(name, name + len);
  }
  // Every shm endpoint has a bell, the listener too: a connection request
  // rings it, so the handshake waits for no poll timer (docs/transport.md
  // "Progress without a wait fd").
  if (rc == 0 && shm) OpenBell();
  if (rc == 0 && shm) {
    alive_ = std::make_shared<std::atomic<bool>>(true);
    std::lock_guard<std::mutex> g(g_local_mu);
    LocalShm()[NameKey(local_name_.data(), local_name_.size())] = alive_;
    ClosedShmListeners().erase(NameKey(local_name_.data(), local_name_.size()));
  }
  if (rc == 0 && listening_ && !shm) {
    // The port the provider bound (port 0 picks one).
    std::string text = NameText(local_name_.data(), local_name_.size());
    size_t colon = text.rfind(':');
    if (colon != std::string::npos) {
      port_ = std::atoi(text.c_str() + colon + 1);
      address_ = text.substr(0, colon);
      if (!address_.empty() && address_.front() == '[') address_ = address_.substr(1, address_.size() - 2);
    }
  }
  if (rc == 0) {
    op = "fi_av_insert";
    if (listener != nullptr) {
      rc = fi_av_insert(av_, initiator_name.data(), 1, &peer_, 0, nullptr) == 1 ? 0 : -FI_EADDRNOTAVAIL;
      FindLocalPeer(initiator_name.data(), initiator_name.size());
      SetPeerBell(initiator_name.data(), initiator_name.size());
    } else if (!listening_) {
      rc = listener_name.empty() ? -FI_EADDRNOTAVAIL
                                 : (fi_av_insert(av_, listener_name.data(), 1, &listener_addr_, 0, nullptr) == 1 ? 0 : -FI_EADDRNOTAVAIL);
    }
  }
  if (rc == 0) {
    op = "fi_trecv";
    rc = PostCmReceives(listening_ ? kCmReceivesListening : kCmReceives);
  }
  if (rc == 0 && cq_fd_ >= 0) {
    if (cq_poller_.Start(loop, cq_fd_, [this]() { OnCqReadable(); }) != 0) {
      op = "uv_poll_start";
      rc = -FI_EIO;
    } else if (before_block_.Init(loop, [this]() { OnBeforeBlock(); }) != 0) {
      op = "uv_prepare_init";
      rc = -FI_EIO;
    }
  }
  if (rc == 0 && cq_fd_ < 0) StartPollTimer(0);
  if (rc != 0) {
    Teardown();
    throw MakeError(env, -rc, op);
  }
  rx_cq_data_ = (open_info->rx_attr->mode & FI_RX_CQ_DATA) != 0;
  if (listener != nullptr) {
    listener->requests_.erase(static_cast<uint32_t>(info[2].As<Napi::Number>().Uint32Value()));
  }
}

int Endpoint::PostCmReceives(size_t count) {
  cm_buf_.reset(new uint8_t[count * kCmSize]());
  void* desc = nullptr;
  if (domain_->mr_mode() & FI_MR_LOCAL) {
    uint64_t key = (domain_->mr_mode() & FI_MR_PROV_KEY) ? 0 : domain_->NextKey();
    int rc = fi_mr_reg(domain_->domain(), cm_buf_.get(), count * kCmSize, FI_RECV, 0, key, 0, &cm_mr_, nullptr);
    if (rc != 0) {
      cm_mr_ = nullptr;
      return rc;
    }
    desc = fi_mr_desc(cm_mr_);
  }
  for (size_t i = 0; i < count; ++i) {
    OpRecord* op = NewOp(0);
    op->cm = true;
    op->recv_buf = cm_buf_.get() + i * kCmSize;
    op->recv_len = kCmSize;
    op->recv_desc = desc;
    ssize_t rc = fi_trecv(ep_, op->recv_buf, kCmSize, desc, FI_ADDR_UNSPEC, kCmTag, 0, op);
    if (rc != 0) {
      FreeOp(op);
      return static_cast<int>(rc);
    }
  }
  return 0;
}

// One handshake message (or a failed receive, len 0): becomes an event for
// JS, queued until the drain is over; the receive is posted again.
void Endpoint::OnCmReceive(OpRecord* op, size_t len) {
  const uint8_t* m = op->recv_buf;
  uint32_t magic = 0;
  uint16_t name_len = 0, pd_len = 0;
  if (len >= kCmHeader) {
    std::memcpy(&magic, m, 4);
    std::memcpy(&name_len, m + 6, 2);
    std::memcpy(&pd_len, m + 8, 2);
  }
  // Anything malformed is dropped: a stray sender must not reach JS.
  bool ok = len >= kCmHeader && magic == kCmMagic && m[5] == kCmVersion && name_len <= kCmMaxName &&
            pd_len <= kCmMaxData && kCmHeader + name_len + pd_len <= len;
  if (ok) {
    const uint8_t kind = m[4];
    const uint8_t* name = m + kCmHeader;
    std::vector<uint8_t> pd(m + kCmHeader + name_len, m + kCmHeader + name_len + pd_len);
    if (listening_ && kind == kCmRequest && name_len > 0) {
      uint32_t id = next_request_++;
      requests_[id] = std::vector<uint8_t>(name, name + name_len);
      cm_events_.push_back(CmEvent{"connreq", id, std::move(pd), 0});
    } else if (!listening_ && kind == kCmAccept && peer_ == FI_ADDR_UNSPEC && listener_addr_ != FI_ADDR_UNSPEC &&
               name_len > 0) {
      fi_addr_t a = FI_ADDR_UNSPEC;
      if (fi_av_insert(av_, name, 1, &a, 0, nullptr) == 1) {
        peer_ = a;
        peer_name_.assign(name, name + name_len);
        FindLocalPeer(name, name_len);
        SetPeerBell(name, name_len);
        cm_events_.push_back(CmEvent{"connected", 0, std::move(pd), 0});
      } else {
        cm_events_.push_back(CmEvent{"error", 0, std::move(pd), FI_EADDRNOTAVAIL});
      }
    } else if (!listening_ && kind == kCmReject && peer_ == FI_ADDR_UNSPEC && listener_addr_ != FI_ADDR_UNSPEC) {
      cm_events_.push_back(CmEvent{"error", 0, std::move(pd), FI_ECONNREFUSED});
    } else if (!listening_ && kind == kCmShutdown && peer_ != FI_ADDR_UNSPEC && !shutdown_seen_ &&
               (peer_name_.empty() || (peer_name_.size() == name_len && std::memcmp(peer_name_.data(), name, name_len) == 0))) {
      shutdown_seen_ = true;
      cm_events_.push_back(CmEvent{"shutdown", 0, {}, 0});
    }
  }
  if (ep_ == nullptr) {
    FreeOp(op);
    return;
  }
  ssize_t rc = fi_trecv(ep_, op->recv_buf, kCmSize, op->recv_desc, FI_ADDR_UNSPEC, kCmTag, 0, op);
  if (rc != 0) FreeOp(op);
}

void Endpoint::QueueCm(uint8_t kind, fi_addr_t to, const void* pd, size_t pd_len, bool remove_after,
                       std::vector<uint8_t> bell) {
  // shm: whom to ring once the message is out; a reject names its receiver's bell itself.
  if (bell.empty() && to != FI_ADDR_UNSPEC) bell = to == peer_ ? peer_bell_ : to == listener_addr_ ? listener_bell_ : bell;
  CmOut out{to, std::vector<uint8_t>(kCmHeader + local_name_.size() + pd_len), remove_after, std::move(bell)};
  uint8_t* m = out.bytes.data();
  const uint16_t name_len = static_cast<uint16_t>(local_name_.size());
  const uint16_t pdl = static_cast<uint16_t>(pd_len);
  std::memcpy(m, &kCmMagic, 4);
  m[4] = kind;
  m[5] = kCmVersion;
  std::memcpy(m + 6, &name_len, 2);
  std::memcpy(m + 8, &pdl, 2);
  if (name_len > 0) std::memcpy(m + kCmHeader, local_name_.data(), name_len);
  if (pd_len > 0) std::memcpy(m + kCmHeader + name_len, pd, pd_len);
  cm_out_.push_back(std::move(out));
}

// fi_tinject copies the message out at once; FI_EAGAIN (rxm still
// connecting, a full queue) leaves it queued for the next pass. On shm the
// receiver's bell is rung at once: the request, accept, reject and shutdown
// would otherwise wait for the receiver's poll timer, up to 10 ms on an idle
// listener or endpoint each way (docs/transport.md "Progress without a wait fd").
void Endpoint::FlushCm() {
  while (!cm_out_.empty() && ep_ != nullptr) {
    CmOut& out = cm_out_.front();
    if (out.to == peer_ && PeerGone()) {
      cm_out_.pop_front();
      continue;
    }
    ssize_t rc = fi_tinject(ep_, out.bytes.data(), out.bytes.size(), out.to, kCmTag);
    // shm's first message to a new peer waits (FI_EAGAIN) until the peer's
    // progress has mapped this side's region: one ring asks for that pass too
    // (once per message: the retries run every pass, back to back at first).
    if (rc != -FI_EAGAIN || !out.rang) RingBell(out.bell);
    if (rc == -FI_EAGAIN) {
      out.rang = true;
      if (cq_fd_ >= 0 || poll_timer_ == nullptr) StartPollTimer(1);
      return;
    }
    if (out.remove_after && av_ != nullptr) fi_av_remove(av_, &out.to, 1, 0);
    cm_out_.pop_front();
  }
}

void Endpoint::DeliverCmEvents() {
  if (cm_events_.empty()) return;
  Napi::Env env(env_);
  Napi::HandleScope scope(env);
  std::vector<CmEvent> events;
  events.swap(cm_events_);
  for (CmEvent& e : events) {
    if (on_event_.IsEmpty()) return;
    Napi::Object ev = Napi::Object::New(env);
    ev.Set("type", e.type);
    if (!e.pd.empty()) ev.Set("privateData", Napi::Buffer<uint8_t>::Copy(env, e.pd.data(), e.pd.size()));
    if (e.type == "connreq") {
      ev.Set("requestId", Napi::Number::New(env, e.request_id));
      const std::vector<uint8_t>& name = requests_[e.request_id];
      ev.Set("peer", NameText(name.data(), name.size()));
    }
    if (e.type == "error") {
      ev.Set("errno", Napi::Number::New(env, e.err));
      ev.Set("code", FabricErrorName(e.err));
      ev.Set("message", e.err == FI_ECONNREFUSED ? "the listener rejected the connection" : FabricErrorMessage(e.err));
    }
    on_event_.MakeCallback(Value(), {ev}, *async_);
  }
}

// Back to back (ms 0) is a uv_idle handle, not a 0 ms timer. A timer that
// restarts itself at 0 ms from its own callback is run again by libuv 1.46's
// uv__run_timers before the loop ever reaches epoll: the loop spun in
// uv_timer_start/uv_timer_stop (perf) and saw no fd, so an io_uring
// completion or a socket waited out the whole busy window, 2 ms and more per
// I/O (docs/transport.md "Progress without a wait fd"). An active idle handle
// runs once per loop iteration and makes the loop poll its fds with a 0 timeout.
void Endpoint::StartPollTimer(uint64_t ms) {
  if (poll_timer_ == nullptr) {
    poll_timer_ = new uv_timer_t;
    uv_timer_init(loop_, poll_timer_);
    poll_timer_->data = this;
    last_busy_ns_ = MonoNs();
  }
  if (ms == 0 && cq_fd_ < 0) {
    if (poll_idle_ == nullptr) {
      poll_idle_ = new uv_idle_t;
      uv_idle_init(loop_, poll_idle_);
      poll_idle_->data = this;
    }
    poll_fast_ = true;
    uv_timer_stop(poll_timer_);
    uv_idle_start(poll_idle_, [](uv_idle_t* h) {
      if (h->data != nullptr) static_cast<Endpoint*>(h->data)->OnPollTimer();
    });
    return;
  }
  poll_fast_ = false;
  if (poll_idle_ != nullptr) uv_idle_stop(poll_idle_);
  uv_timer_start(poll_timer_, [](uv_timer_t* t) {
    if (t->data != nullptr) static_cast<Endpoint*>(t->data)->OnPollTimer();
  }, ms, 0);
}

// The loop's poller for a CQ without a wait fd, and the retry of handshake
// messages the provider could not take yet.
void Endpoint::OnPollTimer() {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  if (cq_ == nullptr) return;
  Napi::Env env(env_);
  Napi::HandleScope scope(env);
  if (PeerGone()) {
    // The peer, an shm endpoint of this process, has closed. libfabric 1.17's
    // progress on this side can then walk into the peer's freed region (a
    // SIGSEGV in fi_cq_read under ASan, operations to the peer still queued),
    // so this side reads its CQ no more: the peer's close is its shutdown,
    // heard here at once, and close() cancels whatever is still posted.
    if (poll_idle_ != nullptr) uv_idle_stop(poll_idle_);
    if (poll_timer_ != nullptr) uv_timer_stop(poll_timer_);
    if (!shutdown_seen_ && !listening_) {
      shutdown_seen_ = true;
      cm_events_.push_back(CmEvent{"shutdown", 0, {}, 0});
      try {
        DeliverCmEvents();
      } catch (const Napi::Error& e) {
        napi_fatal_exception(env, e.Value());
      }
    }
    return;
  }
  const uint64_t posted_before = posted_;
  size_t n = 0;
  try {
    n = DrainCq();
    FlushCm();
    DeliverCmEvents();
  } catch (const Napi::Error& e) {
    napi_fatal_exception(env, e.Value());
  }
  if (cq_ == nullptr || poll_timer_ == nullptr) return;
  RingPeer();
  const uint64_t now = MonoNs();
  if (n > 0 || posted_ != posted_before || !cm_out_.empty()) last_busy_ns_ = now;
  if (cq_fd_ >= 0) {
    // The fd wakes the loop for completions: the timer only retries sends.
    if (!cm_out_.empty()) StartPollTimer(1);
    return;
  }
  const uint64_t idle = now - last_busy_ns_;
  // Busy polling (docs/architecture.md "Busy polling") keeps the passes back to
  // back for its budget after the last activity, as the fd endpoints spin.
  const uint64_t base = bell_fd_ >= 0 && !peer_bell_.empty() ? kBellWindowNs : kBusyWindowNs;
  const uint64_t window = std::max(base, busy_poll_ns_);
  if (idle >= base && idle < window) spins_++;  // a pass only the busy poll asked for
  StartPollTimer(idle < window ? 0 : idle < kSleepAfterNs ? kIdlePollMs : kSleepPollMs);
}

// Binds this endpoint's doorbell and watches it on the loop. Best effort: an
// endpoint without one (the bind failed) is still polled, only later.
void Endpoint::OpenBell() {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  std::vector<uint8_t> a = BellAddress(NameKey(local_name_.data(), local_name_.size()));
  if (bind(fd, reinterpret_cast<const sockaddr*>(a.data()), static_cast<socklen_t>(a.size())) != 0 ||
      bell_poller_.Start(loop_, fd, [this]() { OnBell(); }) != 0) {
    close(fd);
    return;
  }
  bell_fd_ = fd;
}

void Endpoint::SetPeerBell(const uint8_t* name, size_t len) {
  if (!domain_->shm()) return;
  peer_bell_ = BellAddress(NameKey(name, len));
}

// A peer rang: empty the socket first, then run a poll pass. A ring that comes
// after the socket was emptied makes it readable again, so none is lost
// between the two.
void Endpoint::OnBell() {
  std::lock_guard<std::recursive_mutex> g(*lock_);
  wakeups_++;
  uint8_t buf[64];
  for (;;) {
    ssize_t n = recv(bell_fd_, buf, sizeof(buf), 0);
    if (n <= 0) break;
    if (buf[0] == kBellAnswer) ring_back_ = true;
  }
  last_busy_ns_ = MonoNs();
  OnPollTimer();
}

// At the end of each poll pass: ring the peer if anything was posted since the
// last ring (shm moves it only when the peer's progress runs), asking for an
// answer so that our own completions, which the peer's progress produces, are
// read soon too; or answer a ring that asked for one. An answer never asks for
// another, so two idle endpoints never ring each other back and forth.
void Endpoint::RingPeer() {
  if (bell_fd_ < 0 || peer_bell_.empty() || PeerGone()) return;
  uint8_t kind;
  if (posted_ != rung_posted_) kind = kBellAnswer;
  else if (ring_back_) kind = kBellPlain;
  else return;
  rung_posted_ = posted_;
  ring_back_ = false;
  // EAGAIN: the peer's socket is full of rings it has not read, so it will
  // wake anyway. ECONNREFUSED: the peer has no bell (its bind failed, or it
  // closed; a peer binds before it sends its request or accept): forget it,
  // and this side polls back to back after posts again (OnPollTimer).
  if (sendto(bell_fd_, &kind, 1, MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(peer_bell_.data()),
             static_cast<socklen_t>(peer_bell_.size())) == 1)
    rings_++;
  else if (errno == ECONNREFUSED || errno == ENOENT)
    peer_bell_.clear();
}

// One plain ring to a bell address (empty: nobody to ring), best effort.
void Endpoint::RingBell(const std::vector<uint8_t>& bell) {
  if (bell_fd_ < 0 || bell.empty()) return;
  if (sendto(bell_fd_, &kBellPlain, 1, MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(bell.data()),
             static_cast<socklen_t>(bell.size())) == 1)
    rings_++;
}

void Endpoint::FindLocalPeer(const uint8_t* name, size_t len) {
  if (!domain_->shm()) return;
  std::lock_guard<std::mutex> g(g_local_mu);
  auto it = LocalShm().find(NameKey(name, len));
  if (it != LocalShm().end()) peer_alive_ = it->second.lock();
}

void Endpoint::TeardownRdm() {
  bell_poller_.Stop();
  if (bell_fd_ >= 0) {
    close(bell_fd_);
    bell_fd_ = -1;
  }
  if (alive_ != nullptr) {
    alive_->store(false, std::memory_order_release);
    std::lock_guard<std::mutex> g(g_local_mu);
    auto it = LocalShm().find(NameKey(local_name_.data(), local_name_.size()));
    if (it != LocalShm().end() && it->second.lock() == alive_) LocalShm().erase(it);
    if (listening_) ClosedShmListeners().insert(NameKey(local_name_.data(), local_name_.size()));
    alive_.reset();
  }
  if (poll_timer_ != nullptr) {
    uv_timer_stop(poll_timer_);
    poll_timer_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(poll_timer_), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
    poll_timer_ = nullptr;
  }
  if (poll_idle_ != nullptr) {
    uv_idle_stop(poll_idle_);
    poll_idle_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(poll_idle_), [](uv_handle_t* h) { delete reinterpret_cast<uv_idle_t*>(h); });
    poll_idle_ = nullptr;
  }
  if (av_ != nullptr) {
    fi_close(&av_->fid);
    av_ = nullptr;
  }
  if (cm_mr_ != nullptr) {
    fi_close(&cm_mr_->fid);
    cm_mr_ = nullptr;
  }
  if (reserve_fd_ >= 0) {
    close(reserve_fd_);
    reserve_fd_ = -1;
  }
  cm_out_.clear();
  requests_.clear();
}

// reject(requestId, privateData|null): on a listening endpoint.
Napi::Value Endpoint::Reject(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::lock_guard<std::recursive_mutex> g(*lock_);
  CheckOpen(env, "fi_reject");
  if (!listening_) throw MakeUsageError(env, "ERR_INVALID_STATE", EINVAL, "fi_reject", "not a listening endpoint");
  auto it = requests_.find(ToU32(env, info[0], "fi_reject", "requestId"));
  if (it == requests_.end())
    throw MakeUsageError(env, "ERR_UNKNOWN_REQUEST", EINVAL, "fi_reject", "no such pending connection request");
  std::vector<uint8_t> name = std::move(it->second);
  requests_.erase(it);
  const uint8_t* pd = nullptr;
  size_t pd_len = 0;
  if (info[1].IsBuffer()) {
    pd = info[1].As<Napi::Buffer<uint8_t>>().Data();
    pd_len = std::min(kCmMaxData, info[1].As<Napi::Buffer<uint8_t>>().Length());
  }
  fi_addr_t to = FI_ADDR_UNSPEC;
  if (fi_av_insert(av_, name.data(), 1, &to, 0, nullptr) != 1) return env.Undefined();  // nowhere to answer
  QueueCm(kCmReject, to, pd, pd_len, true, domain_->shm() ? BellAddress(NameKey(name.data(), name.size())) : std::vector<uint8_t>{});
  FlushCm();
  return env.Undefined();
}

Napi::Value Endpoint::Port(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), port_); }
Napi::Value Endpoint::Address(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), address_); }

}  // namespace rblk
