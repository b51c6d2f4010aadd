// The two sides of the ceiling. The passive side (the forked child) exposes a
// region for remote read and write and does nothing else, as an rblk
// initiator's I/O pool does; the active side (the parent) posts the RMAs, as
// rblkd does.
//
// The parent and the child talk over two pipes. Child to parent: "port N\n"
// once it listens, then "cpu USER_US SYS_US SWITCHES\n" for the timed window.
// Parent to child: 'S' when the window starts, 'E' when it ends; end of file
// means the parent gave up, and the child leaves.
#ifndef RMA_CEILING_SIDES_H
#define RMA_CEILING_SIDES_H

#include <stdint.h>

#include "fabric-side.h"
#include "histogram.h"
#include "options.h"

// The passive side's whole life: listen, accept one connection, serve it
// until the parent sends 'E'. Returns 0, or a negative error already printed.
int passive_run(const struct options *o, int ctl_fd, int report_fd);

int active_connect(const struct options *o, uint16_t port, struct side *s, struct remote_region *r);
// FI_EP_RDM: the passive side's endpoint name (hex) goes into the address vector.
int active_connect_rdm(const struct options *o, const char *hex, struct side *s);
// Writes a pattern to blocks of the remote region, reads them back into
// other memory and compares. Returns 0, or -FI_EIO on a mismatch (printed).
int active_verify(const struct options *o, struct side *s, const struct remote_region *r, uint64_t *blocks);

struct loop_result {
  uint64_t ops;
  uint64_t elapsed_ns;
  struct histogram latency;
};

int active_loop(const struct options *o, struct side *s, const struct remote_region *r, struct loop_result *out);

// Reads one completion error off the CQ and prints it against `op`; returns it negated.
int cq_fail(struct side *s, const char *op);

#endif
