// The program's flags (rma-ceiling --help lists them).
#ifndef RMA_CEILING_OPTIONS_H
#define RMA_CEILING_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

enum rma_op { OP_READ, OP_WRITE };

struct options {
  const char *provider;
  size_t size;        // bytes per RMA
  unsigned qd;        // RMAs kept in flight
  enum rma_op op;
  double seconds;     // length of the timed loop
  size_t span;        // bytes of the passive side's region the offsets range over
  bool random;        // block-aligned random offsets, else one sequential cursor
  bool verify;        // write a pattern, read it back, compare, before the loop
  bool busy_poll;     // spin on fi_cq_read instead of sleeping on the wait fd
  bool mr_basic;      // ask for FI_MR_BASIC (API 1.4): virtual addresses and provider keys, as on verbs
  bool delivery;      // fi_write completes on delivery to the peer (FI_DELIVERY_COMPLETE), not on transmit
  bool rdm;           // FI_EP_RDM (shm, *;ofi_rxm): an address vector, the peer's name over the pipe
};

// Fills *o from argv; prints the reason and returns -1 on a bad flag, 1 after --help.
int parse_options(int argc, char **argv, struct options *o);

const char *op_name(enum rma_op op);

#endif
