#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sides.h"

#define LOCAL_KEY 0x10ca1ULL
// A completion that takes this long means the peer or the provider is stuck.
#define CQ_TIMEOUT_MS 10000

struct slot {
  struct fi_context ctx;  // first: the completion's op_context points here
  uint64_t posted_ns;
  unsigned index;
};

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static uint64_t xorshift64(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

int cq_fail(struct side *s, const char *op) {
  struct fi_cq_err_entry err = {0};
  ssize_t n = fi_cq_readerr(s->cq, &err, 0);
  if (n < 0) return fi_fail("fi_cq_readerr", n);
  fprintf(stderr, "rma-ceiling: %s: %s (%d): %s\n", op, fi_strerror(err.err), -err.err,
          fi_cq_strerror(s->cq, err.prov_errno, err.err_data, NULL, 0));
  return -err.err;
}

int active_connect(const struct options *o, uint16_t port, struct side *s, struct remote_region *r) {
  struct fi_info *hints = make_hints(o);
  if (hints == NULL) return fi_fail("fi_allocinfo", -FI_ENOMEM);
  char service[8];
  snprintf(service, sizeof service, "%u", port);
  int rc = fi_getinfo(api_version(o), "127.0.0.1", service, 0, hints, &s->getinfo);
  fi_freeinfo(hints);
  if (rc) return fi_fail("fi_getinfo", rc);
  if (o->qd > s->getinfo->tx_attr->size) {
    fprintf(stderr, "rma-ceiling: --qd %u is more than the provider's transmit queue (%zu)\n", o->qd,
            s->getinfo->tx_attr->size);
    return -FI_EINVAL;
  }
  if ((rc = open_fabric_eq(s))) return rc;
  if ((rc = open_domain_ep(s, o->qd))) return rc;
  // One block per slot; --verify reads back into a second set.
  size_t len = (size_t)o->qd * o->size * (o->verify ? 2 : 1);
  if ((rc = register_buffer(s, len, FI_READ | FI_WRITE, LOCAL_KEY))) return rc;
  rc = fi_connect(s->ep, s->getinfo->dest_addr, NULL, 0);
  if (rc) return fi_fail("fi_connect", rc);
  struct {
    struct fi_eq_cm_entry e;
    uint8_t data[64];
  } cm;
  ssize_t n = wait_cm_event(s, FI_CONNECTED, &cm.e, sizeof cm, 10000, "fi_eq_sread(FI_CONNECTED)");
  if (n < 0) return (int)n;
  if ((size_t)n < sizeof cm.e + sizeof(struct wire_region)) {
    fprintf(stderr, "rma-ceiling: FI_CONNECTED carried %zd bytes of private data, not a region\n", n - (ssize_t)sizeof cm.e);
    return -FI_EOTHER;
  }
  struct wire_region w;
  memcpy(&w, cm.data, sizeof w);
  *r = (struct remote_region){.addr = be64toh(w.addr_be), .key = be64toh(w.key_be), .len = be64toh(w.len_be)};
  if (r->len < o->span) {
    fprintf(stderr, "rma-ceiling: the peer's region (%" PRIu64 " bytes) is smaller than --span\n", r->len);
    return -FI_EOTHER;
  }
  return 0;
}

int active_connect_rdm(const struct options *o, const char *hex, struct side *s) {
  struct fi_info *hints = make_hints(o);
  if (hints == NULL) return fi_fail("fi_allocinfo", -FI_ENOMEM);
  s->rdm = true;
  int rc = fi_getinfo(api_version(o), NULL, NULL, 0, hints, &s->getinfo);
  fi_freeinfo(hints);
  if (rc) return fi_fail("fi_getinfo", rc);
  if (o->qd > s->getinfo->tx_attr->size) {
    fprintf(stderr, "rma-ceiling: --qd %u is more than the provider's transmit queue (%zu)\n", o->qd,
            s->getinfo->tx_attr->size);
    return -FI_EINVAL;
  }
  if ((rc = open_fabric_eq(s))) return rc;
  if ((rc = open_domain_ep(s, o->qd))) return rc;
  size_t len = (size_t)o->qd * o->size * (o->verify ? 2 : 1);
  if ((rc = register_buffer(s, len, FI_READ | FI_WRITE, LOCAL_KEY))) return rc;
  uint8_t name[256];
  size_t n = strlen(hex) / 2;
  if (n == 0 || n > sizeof name) return fi_fail("the passive side's name", -FI_EINVAL);
  for (size_t i = 0; i < n; i++) {
    unsigned b;
    if (sscanf(hex + 2 * i, "%2x", &b) != 1) return fi_fail("the passive side's name", -FI_EINVAL);
    name[i] = (uint8_t)b;
  }
  if (fi_av_insert(s->av, name, 1, &s->peer, 0, NULL) != 1) return fi_fail("fi_av_insert", -FI_EADDRNOTAVAIL);
  return 0;
}

static ssize_t post(const struct options *o, struct side *s, enum rma_op op, void *local, uint64_t offset,
                    const struct remote_region *r, struct fi_context *ctx) {
  // FI_MR_LOCAL: the provider needs the local buffer's descriptor; otherwise it may ignore one.
  void *desc = (s->mr_mode & FI_MR_LOCAL) ? fi_mr_desc(s->mr) : NULL;
  uint64_t addr = r->addr + offset;
  if (op == OP_READ) return fi_read(s->ep, local, o->size, desc, s->peer, addr, r->key, ctx);
  if (!o->delivery) return fi_write(s->ep, local, o->size, desc, s->peer, addr, r->key, ctx);
  // A write's default completion on tcp and sockets means the buffer may be
  // reused, not that the peer has the data: ask for delivery to time a round trip.
  struct iovec iov = {.iov_base = local, .iov_len = o->size};
  struct fi_rma_iov rma = {.addr = addr, .len = o->size, .key = r->key};
  struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = s->peer, .rma_iov = &rma, .rma_iov_count = 1, .context = ctx};
  return fi_writemsg(s->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

// Reads at least one completion, sleeping on the CQ's wait fd (or spinning
// with --busy-poll); returns how many, or a negative error already printed.
static ssize_t reap(const struct options *o, struct side *s, struct fi_cq_entry *entries, size_t max) {
  const bool spin = o->busy_poll || s->no_wait;  // shm: no wait fd to sleep on
  for (;;) {
    ssize_t n = spin ? fi_cq_read(s->cq, entries, max) : fi_cq_sread(s->cq, entries, max, NULL, CQ_TIMEOUT_MS);
    if (n > 0) return n;
    if (n == -FI_EAGAIN && spin) continue;
    if (n == -FI_EAVAIL) return cq_fail(s, o->op == OP_READ ? "fi_read completion" : "fi_write completion");
    return fi_fail(spin ? "fi_cq_read" : "fi_cq_sread", n);
  }
}

// Posts one RMA, reaping completions while the provider says to try again;
// each reaped completion counts towards *done.
static int post_now(const struct options *o, struct side *s, enum rma_op op, void *local, uint64_t offset,
                    const struct remote_region *r, struct fi_context *ctx, struct fi_cq_entry *entries, unsigned *done) {
  for (;;) {
    ssize_t rc = post(o, s, op, local, offset, r, ctx);
    if (rc == 0) return 0;
    if (rc != -FI_EAGAIN) return fi_fail(op == OP_READ ? "fi_read" : "fi_write", rc);
    ssize_t n = fi_cq_read(s->cq, entries, o->qd);
    if (n == -FI_EAVAIL) return cq_fail(s, "completion");
    if (n > 0) *done += (unsigned)n;
  }
}

static int wait_for(const struct options *o, struct side *s, struct fi_cq_entry *entries, unsigned want, unsigned *done) {
  while (*done < want) {
    ssize_t n = reap(o, s, entries, o->qd);
    if (n < 0) return (int)n;
    *done += (unsigned)n;
  }
  return 0;
}

// Bytes no earlier run and no other block could have left behind.
static void fill_pattern(uint8_t *p, size_t len, uint64_t seed, uint64_t block) {
  uint64_t x = seed ^ ((block + 1) * 0x9E3779B97F4A7C15ULL);
  for (size_t i = 0; i < len; i += 8) {
    uint64_t v = xorshift64(&x);
    memcpy(p + i, &v, len - i < 8 ? len - i : 8);
  }
}

int active_verify(const struct options *o, struct side *s, const struct remote_region *r, uint64_t *blocks) {
  struct fi_context *ctx = calloc(o->qd, sizeof *ctx);
  struct fi_cq_entry *entries = calloc(o->qd, sizeof *entries);
  int rc = 0;
  if (ctx == NULL || entries == NULL) {
    rc = fi_fail("calloc", -FI_ENOMEM);
    goto out;
  }
  uint8_t *src = s->buf;
  uint8_t *dst = src + (size_t)o->qd * o->size;
  uint64_t seed = ((uint64_t)getpid() << 32) ^ now_ns();
  // Every slot at least once, and enough blocks to cross many offsets of the region.
  uint64_t total = o->span / o->size;
  uint64_t want = o->qd > 64 ? o->qd : 64;
  if (total > want) total = want;
  for (uint64_t b0 = 0; b0 < total && rc == 0; b0 += o->qd) {
    unsigned batch = (unsigned)(total - b0 < o->qd ? total - b0 : o->qd);
    unsigned done = 0;
    for (unsigned i = 0; i < batch && rc == 0; i++) {
      fill_pattern(src + (size_t)i * o->size, o->size, seed, b0 + i);
      rc = post_now(o, s, OP_WRITE, src + (size_t)i * o->size, (b0 + i) * o->size, r, &ctx[i], entries, &done);
    }
    if (rc == 0) rc = wait_for(o, s, entries, batch, &done);
    if (rc) break;
    memset(dst, 0, (size_t)batch * o->size);
    done = 0;
    for (unsigned i = 0; i < batch && rc == 0; i++)
      rc = post_now(o, s, OP_READ, dst + (size_t)i * o->size, (b0 + i) * o->size, r, &ctx[i], entries, &done);
    if (rc == 0) rc = wait_for(o, s, entries, batch, &done);
    for (unsigned i = 0; i < batch && rc == 0; i++) {
      const uint8_t *a = src + (size_t)i * o->size, *b = dst + (size_t)i * o->size;
      if (memcmp(a, b, o->size) == 0) continue;
      size_t at = 0;
      while (a[at] == b[at]) at++;
      fprintf(stderr, "rma-ceiling: verify: block %" PRIu64 " read back differs at byte %zu (wrote 0x%02x, read 0x%02x)\n",
              b0 + i, at, a[at], b[at]);
      rc = -FI_EIO;
    }
  }
  if (rc == 0) *blocks = total;
out:
  free(entries);
  free(ctx);
  return rc;
}

int active_loop(const struct options *o, struct side *s, const struct remote_region *r, struct loop_result *out) {
  struct slot *slots = calloc(o->qd, sizeof *slots);
  unsigned *ready = calloc(o->qd, sizeof *ready);
  struct fi_cq_entry *entries = calloc(o->qd, sizeof *entries);
  int rc = 0;
  if (slots == NULL || ready == NULL || entries == NULL) {
    rc = fi_fail("calloc", -FI_ENOMEM);
    goto out;
  }
  uint64_t blocks = o->span / o->size;
  uint64_t rng = now_ns() | 1, cursor = 0;
  unsigned nready = o->qd, inflight = 0;
  for (unsigned i = 0; i < o->qd; i++) slots[i].index = ready[i] = i;
  bool stopping = false;
  uint64_t t0 = now_ns();
  uint64_t end = t0 + (uint64_t)(o->seconds * 1e9);
  for (;;) {
    while (nready > 0 && !stopping) {
      struct slot *sl = &slots[ready[nready - 1]];
      uint64_t block = o->random ? xorshift64(&rng) % blocks : cursor++ % blocks;
      sl->posted_ns = now_ns();
      ssize_t p = post(o, s, o->op, (uint8_t *)s->buf + (size_t)sl->index * o->size, block * o->size, r, &sl->ctx);
      if (p == -FI_EAGAIN) break;
      if (p) {
        rc = fi_fail(o->op == OP_READ ? "fi_read" : "fi_write", p);
        goto out;
      }
      nready--;
      inflight++;
    }
    if (inflight == 0) {
      if (stopping) break;
      // Refused with nothing in flight: give the provider a turn and post again.
      ssize_t n = fi_cq_read(s->cq, entries, 0);
      if (n == -FI_EAVAIL) {
        rc = cq_fail(s, "completion");
        goto out;
      }
      continue;
    }
    ssize_t n = reap(o, s, entries, inflight);
    if (n < 0) {
      rc = (int)n;
      goto out;
    }
    uint64_t now = now_ns();
    for (ssize_t i = 0; i < n; i++) {
      struct slot *sl = (struct slot *)entries[i].op_context;
      histogram_record(&out->latency, now - sl->posted_ns);
      ready[nready++] = sl->index;
    }
    out->ops += (uint64_t)n;
    inflight -= (unsigned)n;
    if (now >= end) stopping = true;
  }
  out->elapsed_ns = now_ns() - t0;
out:
  free(entries);
  free(ready);
  free(slots);
  return rc;
}
