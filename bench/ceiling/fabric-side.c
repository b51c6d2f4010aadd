#include "fabric-side.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The mr_mode bits this program knows how to honour (fi_domain(3)).
#define HONOURED_MR_MODE (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT)

int fi_fail(const char *op, long rc) {
  fprintf(stderr, "rma-ceiling: %s: %s (%ld)\n", op, fi_strerror((int)-rc), rc);
  return rc < 0 ? (int)rc : -FI_EOTHER;
}

uint32_t api_version(const struct options *o) {
  // FI_MR_BASIC is the mr_mode of API 1.4 and earlier; newer versions spell it in bits.
  return o->mr_basic ? FI_VERSION(1, 4) : FI_VERSION(1, 17);
}

struct fi_info *make_hints(const struct options *o) {
  struct fi_info *hints = fi_allocinfo();
  if (hints == NULL) return NULL;
  hints->ep_attr->type = o->rdm ? FI_EP_RDM : FI_EP_MSG;
  hints->caps = FI_RMA;
  // Every operation passes its own struct fi_context, so the provider may use it.
  hints->mode = FI_CONTEXT;
  hints->domain_attr->mr_mode = o->mr_basic ? FI_MR_BASIC : HONOURED_MR_MODE;
  // One thread per side touches the objects.
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->fabric_attr->prov_name = strdup(o->provider);
  if (hints->fabric_attr->prov_name == NULL) {
    fi_freeinfo(hints);
    return NULL;
  }
  return hints;
}

uint64_t granted_mr_mode(const struct fi_info *info) {
  int m = info->domain_attr->mr_mode;
  if (m == FI_MR_BASIC) return FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
  if (m == FI_MR_SCALABLE) return 0;
  return (uint64_t)m;
}

int open_fabric_eq(struct side *s) {
  int rc = fi_fabric(s->getinfo->fabric_attr, &s->fabric, NULL);
  if (rc) return fi_fail("fi_fabric", rc);
  struct fi_eq_attr eq_attr = {.size = 16, .wait_obj = FI_WAIT_FD};
  rc = fi_eq_open(s->fabric, &eq_attr, &s->eq, NULL);
  if (rc) return fi_fail("fi_eq_open", rc);
  return 0;
}

int open_domain_ep(struct side *s, size_t cq_size) {
  struct fi_info *info = s->conn_info ? s->conn_info : s->getinfo;
  s->mr_mode = granted_mr_mode(info);
  int rc = fi_domain(s->fabric, info, &s->domain, NULL);
  if (rc) return fi_fail("fi_domain", rc);
  // FI_WAIT_FD: the same wait object the addon polls through libuv, so both ceilings sleep the same way.
  struct fi_cq_attr cq_attr = {.size = cq_size, .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_FD};
  rc = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL);
  if ((rc == -FI_ENOSYS || rc == -FI_EINVAL) && s->rdm) {
    // shm has no wait object: both sides spin (as the addon polls it on a timer).
    cq_attr.wait_obj = FI_WAIT_NONE;
    s->no_wait = true;
    rc = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL);
  }
  if (rc) return fi_fail("fi_cq_open", rc);
  rc = fi_endpoint(s->domain, info, &s->ep, NULL);
  if (rc) return fi_fail("fi_endpoint", rc);
  if (s->rdm) {
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = 1};
    rc = fi_av_open(s->domain, &av_attr, &s->av, NULL);
    if (rc) return fi_fail("fi_av_open", rc);
    rc = fi_ep_bind(s->ep, &s->av->fid, 0);
    if (rc) return fi_fail("fi_ep_bind(av)", rc);
  } else {
    rc = fi_ep_bind(s->ep, &s->eq->fid, 0);
    if (rc) return fi_fail("fi_ep_bind(eq)", rc);
  }
  rc = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV);
  if (rc) return fi_fail("fi_ep_bind(cq)", rc);
  rc = fi_enable(s->ep);
  if (rc) return fi_fail("fi_enable", rc);
  return 0;
}

int register_buffer(struct side *s, size_t len, uint64_t access, uint64_t requested_key) {
  long page = sysconf(_SC_PAGESIZE);
  size_t rounded = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
  int rc = posix_memalign(&s->buf, (size_t)page, rounded);
  if (rc) {
    s->buf = NULL;
    return fi_fail("posix_memalign", -FI_ENOMEM);
  }
  memset(s->buf, 0, rounded);
  s->buf_len = rounded;
  rc = fi_mr_reg(s->domain, s->buf, s->buf_len, access, 0, requested_key, 0, &s->mr, NULL);
  if (rc) return fi_fail("fi_mr_reg", rc);
  if (s->mr_mode & FI_MR_ENDPOINT) {
    rc = fi_mr_bind(s->mr, &s->ep->fid, 0);
    if (rc) return fi_fail("fi_mr_bind", rc);
    rc = fi_mr_enable(s->mr);
    if (rc) return fi_fail("fi_mr_enable", rc);
  }
  return 0;
}

int ep_name_hex(struct side *s, char *out) {
  uint8_t name[256];
  size_t len = sizeof name;
  int rc = fi_getname(&s->ep->fid, name, &len);
  if (rc) return fi_fail("fi_getname", rc);
  if (len > sizeof name) return fi_fail("fi_getname (name too long)", -FI_ETOOSMALL);
  for (size_t i = 0; i < len; i++) sprintf(out + 2 * i, "%02x", name[i]);
  out[2 * len] = '\0';
  return 0;
}

static const char *event_name(uint32_t e) {
  switch (e) {
    case FI_CONNREQ: return "FI_CONNREQ";
    case FI_CONNECTED: return "FI_CONNECTED";
    case FI_SHUTDOWN: return "FI_SHUTDOWN";
    default: return "an unexpected event";
  }
}

ssize_t wait_cm_event(struct side *s, uint32_t want, struct fi_eq_cm_entry *entry, size_t len, int timeout_ms,
                      const char *op) {
  uint32_t event = 0;
  ssize_t n = fi_eq_sread(s->eq, &event, entry, len, timeout_ms, 0);
  if (n == -FI_EAVAIL) {
    struct fi_eq_err_entry err = {0};
    if (fi_eq_readerr(s->eq, &err, 0) > 0) {
      fprintf(stderr, "rma-ceiling: %s: %s (%d): %s\n", op, fi_strerror(err.err), -err.err,
              fi_eq_strerror(s->eq, err.prov_errno, err.err_data, NULL, 0));
      return -err.err;
    }
  }
  if (n < 0) return fi_fail(op, n);
  if (event != want) {
    fprintf(stderr, "rma-ceiling: %s: got %s, not %s\n", op, event_name(event), event_name(want));
    if (event == FI_CONNREQ) fi_freeinfo(entry->info);
    return -FI_EOTHER;
  }
  return n;
}

void side_close(struct side *s) {
  if (s->mr) fi_close(&s->mr->fid);
  free(s->buf);
  if (s->ep) fi_close(&s->ep->fid);
  if (s->av) fi_close(&s->av->fid);
  if (s->cq) fi_close(&s->cq->fid);
  if (s->domain) fi_close(&s->domain->fid);
  if (s->conn_info) fi_freeinfo(s->conn_info);
  if (s->pep) fi_close(&s->pep->fid);
  if (s->eq) fi_close(&s->eq->fid);
  if (s->fabric) fi_close(&s->fabric->fid);
  if (s->getinfo) fi_freeinfo(s->getinfo);
  *s = (struct side){0};
}
