// One side of the connection and the libfabric objects it owns, opened in
// the order the fields are listed and closed in the reverse order by
// side_close(), whatever point the opening reached.
#ifndef RMA_CEILING_FABRIC_SIDE_H
#define RMA_CEILING_FABRIC_SIDE_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>
#include <stdbool.h>
#include <stdint.h>

#include "options.h"

struct side {
  struct fi_info *getinfo;    // from fi_getinfo
  struct fid_fabric *fabric;
  struct fid_eq *eq;
  struct fid_pep *pep;        // passive side only
  struct fi_info *conn_info;  // passive side only: from the FI_CONNREQ event
  struct fid_domain *domain;
  struct fid_cq *cq;
  struct fid_ep *ep;
  void *buf;
  size_t buf_len;
  struct fid_mr *mr;
  uint64_t mr_mode;           // the granted bits, FI_MR_BASIC spelled out
  // FI_EP_RDM: the address vector, the peer's entry in it, and whether the
  // CQ has no wait fd (shm), so both sides spin on it.
  struct fid_av *av;
  fi_addr_t peer;
  bool no_wait;
  bool rdm;
};

// What the passive side tells the active one in the accept's private data:
// where its region is and how to name it (fi_mr(3): the address is an offset
// unless FI_MR_VIRT_ADDR, the key is the provider's under FI_MR_PROV_KEY).
struct wire_region {
  uint64_t addr_be;
  uint64_t key_be;
  uint64_t len_be;
};

struct remote_region {
  uint64_t addr;
  uint64_t key;
  uint64_t len;
};

// Prints "rma-ceiling: <op>: <fi_strerror> (<rc>)" and returns rc (negative).
int fi_fail(const char *op, long rc);

// Hints for FI_EP_MSG with RMA on the named provider, asking for every
// mr_mode bit this program honours (or FI_MR_BASIC with --mr-basic).
struct fi_info *make_hints(const struct options *o);
uint32_t api_version(const struct options *o);

// The granted mr_mode as bits (FI_MR_BASIC is VIRT_ADDR | PROV_KEY | ALLOCATED).
uint64_t granted_mr_mode(const struct fi_info *info);

// Opens the fabric and an event queue with a pollable wait fd.
int open_fabric_eq(struct side *s);
// Opens the domain, the CQ (FI_WAIT_FD) and the endpoint from conn_info, or
// getinfo on the active side; binds and enables it.
int open_domain_ep(struct side *s, size_t cq_size);
// The endpoint's name (fi_getname) as hex into out (2 * 256 + 1 bytes); 0 or an error.
int ep_name_hex(struct side *s, char *out);
// Allocates s->buf (page-aligned: FI_MR_ALLOCATED) and registers it; binds it
// to the endpoint under FI_MR_ENDPOINT.
int register_buffer(struct side *s, size_t len, uint64_t access, uint64_t requested_key);
// Waits up to timeout_ms for one connection-manager event, which must be `want`.
// entry must have room for `len` bytes; returns the bytes read or a negative error.
ssize_t wait_cm_event(struct side *s, uint32_t want, struct fi_eq_cm_entry *entry, size_t len, int timeout_ms,
                      const char *op);

void side_close(struct side *s);

#endif
