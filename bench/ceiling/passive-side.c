#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sides.h"

#define REGION_KEY 0x5eedULL

// One byte from the parent: 'S', 'E', or 0 at end of file (the parent is gone).
static int read_control(int ctl_fd) {
  char c;
  ssize_t n;
  do n = read(ctl_fd, &c, 1);
  while (n < 0 && errno == EINTR);
  return n == 1 ? c : 0;
}

static bool control_ready(int ctl_fd, int timeout_ms) {
  struct pollfd p = {.fd = ctl_fd, .events = POLLIN};
  return poll(&p, 1, timeout_ms) > 0;
}

static int listen_on_loopback(const struct options *o, struct side *s, uint16_t *port) {
  struct fi_info *hints = make_hints(o);
  if (hints == NULL) return fi_fail("fi_allocinfo", -FI_ENOMEM);
  // Port 0: the kernel picks a free one, read back with fi_getname.
  int rc = fi_getinfo(api_version(o), "127.0.0.1", "0", FI_SOURCE, hints, &s->getinfo);
  fi_freeinfo(hints);
  if (rc) return fi_fail("fi_getinfo", rc);
  if ((rc = open_fabric_eq(s))) return rc;
  rc = fi_passive_ep(s->fabric, s->getinfo, &s->pep, NULL);
  if (rc) return fi_fail("fi_passive_ep", rc);
  rc = fi_pep_bind(s->pep, &s->eq->fid, 0);
  if (rc) return fi_fail("fi_pep_bind", rc);
  rc = fi_listen(s->pep);
  if (rc) return fi_fail("fi_listen", rc);
  struct sockaddr_storage ss;
  size_t len = sizeof ss;
  rc = fi_getname(&s->pep->fid, &ss, &len);
  if (rc) return fi_fail("fi_getname", rc);
  if (ss.ss_family != AF_INET) return fi_fail("fi_getname (not an IPv4 address)", -FI_EADDRNOTAVAIL);
  *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  return 0;
}

// Takes the one connection: its endpoint, then the region, then the accept
// carrying where the region is, so the peer can RMA from its first post.
static int accept_one(const struct options *o, struct side *s, int ctl_fd) {
  struct {
    struct fi_eq_cm_entry e;
    uint8_t data[64];
  } cm;
  uint32_t event = 0;
  // Wait in slices, so a parent that fails before connecting does not leave the child behind.
  for (int waited = 0;; waited += 100) {
    ssize_t n = fi_eq_sread(s->eq, &event, &cm.e, sizeof cm, 100, 0);
    if (n >= 0) break;
    if (n != -FI_EAGAIN) return (int)wait_cm_event(s, FI_CONNREQ, &cm.e, sizeof cm, 0, "fi_eq_sread(FI_CONNREQ)");
    if (control_ready(ctl_fd, 0) || waited > 30000) return fi_fail("fi_eq_sread(FI_CONNREQ)", -FI_ETIMEDOUT);
  }
  if (event != FI_CONNREQ) return fi_fail("fi_eq_sread (not FI_CONNREQ)", -FI_EOTHER);
  s->conn_info = cm.e.info;
  int rc = open_domain_ep(s, 64);
  if (rc) return rc;
  rc = register_buffer(s, o->span, FI_REMOTE_READ | FI_REMOTE_WRITE, REGION_KEY);
  if (rc) return rc;
  uint64_t addr = (s->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)s->buf : 0;
  struct wire_region w = {.addr_be = htobe64(addr), .key_be = htobe64(fi_mr_key(s->mr)), .len_be = htobe64(s->buf_len)};
  rc = fi_accept(s->ep, &w, sizeof w);
  if (rc) return fi_fail("fi_accept", rc);
  ssize_t n = wait_cm_event(s, FI_CONNECTED, &cm.e, sizeof cm, 10000, "fi_eq_sread(FI_CONNECTED)");
  return n < 0 ? (int)n : 0;
}

// FI_EP_RDM: no listener and no connection. The endpoint's name and the
// region go to the parent over the pipe: "rdm NAME-HEX ADDR KEY LEN".
static int open_rdm(const struct options *o, struct side *s, int report_fd) {
  struct fi_info *hints = make_hints(o);
  if (hints == NULL) return fi_fail("fi_allocinfo", -FI_ENOMEM);
  s->rdm = true;
  // shm names its endpoints itself; rxm binds to loopback like the MSG listener.
  bool shm = strcmp(o->provider, "shm") == 0;
  int rc = fi_getinfo(api_version(o), shm ? NULL : "127.0.0.1", shm ? NULL : "0", shm ? 0 : FI_SOURCE, hints, &s->getinfo);
  fi_freeinfo(hints);
  if (rc) return fi_fail("fi_getinfo", rc);
  if ((rc = open_fabric_eq(s))) return rc;
  if ((rc = open_domain_ep(s, 64))) return rc;
  rc = register_buffer(s, o->span, FI_REMOTE_READ | FI_REMOTE_WRITE, REGION_KEY);
  if (rc) return rc;
  char hex[2 * 256 + 1];
  if ((rc = ep_name_hex(s, hex))) return rc;
  uint64_t addr = (s->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)s->buf : 0;
  dprintf(report_fd, "rdm %s %llx %llx %llx\n", hex, (unsigned long long)addr, (unsigned long long)fi_mr_key(s->mr),
          (unsigned long long)s->buf_len);
  return 0;
}

static void report_cpu(int report_fd, const struct rusage *a, const struct rusage *b) {
  long long user = (b->ru_utime.tv_sec - a->ru_utime.tv_sec) * 1000000LL + (b->ru_utime.tv_usec - a->ru_utime.tv_usec);
  long long sys = (b->ru_stime.tv_sec - a->ru_stime.tv_sec) * 1000000LL + (b->ru_stime.tv_usec - a->ru_stime.tv_usec);
  long long sw = (b->ru_nvcsw - a->ru_nvcsw) + (b->ru_nivcsw - a->ru_nivcsw);
  dprintf(report_fd, "cpu %lld %lld %lld\n", user, sys, sw);
}

// Drives the provider's progress (the software providers move the peer's
// RMAs only while this side reads its CQ) and sleeps on the CQ's and EQ's
// wait fds in between, as the addon does through uv_poll, until 'E'.
static int serve(const struct options *o, struct side *s, int ctl_fd, int report_fd) {
  int cq_fd = -1, eq_fd = -1;
  int rc = s->no_wait ? 0 : fi_control(&s->cq->fid, FI_GETWAIT, &cq_fd);
  if (rc) return fi_fail("fi_control(cq, FI_GETWAIT)", rc);
  rc = s->rdm ? 0 : fi_control(&s->eq->fid, FI_GETWAIT, &eq_fd);
  if (rc) return fi_fail("fi_control(eq, FI_GETWAIT)", rc);
  struct fid *waited[2] = {&s->cq->fid, &s->eq->fid};
  struct fi_cq_entry entries[16];
  struct rusage start = {0};
  bool peer_gone = false;
  for (unsigned spins = 0;; spins++) {
    int timeout = 0;
    if (!peer_gone) {
      // This side posts nothing: a completion would be a surprise, but the read is what makes progress.
      ssize_t n = fi_cq_read(s->cq, entries, 16);
      if (n == -FI_EAVAIL) return cq_fail(s, "fi_cq_read (passive)");
      if (n < 0 && n != -FI_EAGAIN) return fi_fail("fi_cq_read (passive)", n);
      if (!s->rdm) {
        uint32_t event;
        struct fi_eq_cm_entry e;
        n = fi_eq_read(s->eq, &event, &e, sizeof e, 0);
        if (n >= 0 && event == FI_SHUTDOWN) peer_gone = true;
        else if (n == -FI_EAVAIL) return (int)wait_cm_event(s, FI_SHUTDOWN, &e, sizeof e, 0, "fi_eq_read (passive)");
      }
      // RDM has no shutdown event: the parent's 'E' ends it. shm has no wait fd: spin.
      if (!o->busy_poll && !s->no_wait && fi_trywait(s->fabric, waited, s->rdm ? 1 : 2) == FI_SUCCESS) timeout = -1;
      // The provider has more to do: progress again, and look at the parent only now and then.
      else if (spins % 64 != 0) continue;
    }
    // After FI_SHUTDOWN the endpoint's socket stays readable: wait on the parent alone.
    struct pollfd p[3] = {{.fd = ctl_fd, .events = POLLIN}, {.fd = cq_fd, .events = POLLIN}, {.fd = eq_fd, .events = POLLIN}};
    if (poll(p, peer_gone ? 1 : s->rdm ? 2 : 3, peer_gone ? -1 : timeout) < 0 && errno != EINTR) return fi_fail("poll", -errno);
    if (!(p[0].revents & (POLLIN | POLLHUP))) continue;
    int c = read_control(ctl_fd);
    if (c == 'S') {
      getrusage(RUSAGE_SELF, &start);
    } else if (c == 'E') {
      struct rusage end;
      getrusage(RUSAGE_SELF, &end);
      report_cpu(report_fd, &start, &end);
      return 0;
    } else {
      return -FI_ECANCELED;  // the parent left; it has said why
    }
  }
}

int passive_run(const struct options *o, int ctl_fd, int report_fd) {
  struct side s = {0};
  uint16_t port = 0;
  int rc;
  if (o->rdm) {
    rc = open_rdm(o, &s, report_fd);
  } else {
    rc = listen_on_loopback(o, &s, &port);
    if (rc == 0) {
      dprintf(report_fd, "port %u\n", port);
      rc = accept_one(o, &s, ctl_fd);
    }
  }
  if (rc == 0) rc = serve(o, &s, ctl_fd, report_fd);
  side_close(&s);
  return rc;
}
