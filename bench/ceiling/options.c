#include "options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: rma-ceiling [--provider tcp|sockets] [--size BYTES[K|M]] [--qd N] [--op read|write]\n"
    "                   [--seconds S] [--span BYTES[K|M]] [--pattern rand|seq] [--verify]\n"
    "                   [--busy-poll] [--mr-basic] [--delivery-complete]\n"
    "  FI_EP_RDM (no connection; the peer's name comes over the pipe) for shm and *;ofi_rxm providers\n"
    "Forks a passive peer on 127.0.0.1 (port 0), connects to it over FI_EP_MSG, keeps --qd\n"
    "fi_read or fi_write operations of --size bytes in flight for --seconds, and prints one\n"
    "JSON line: ops/s, MB/s, latency percentiles, and CPU per op of each side.\n";

const char *op_name(enum rma_op op) { return op == OP_READ ? "read" : "write"; }

// "4096", "4K", "64M": sizes in bytes with binary multiples.
static int parse_bytes(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s) return -1;
  if (*end == 'K' || *end == 'k') v <<= 10, end++;
  else if (*end == 'M' || *end == 'm') v <<= 20, end++;
  else if (*end == 'G' || *end == 'g') v <<= 30, end++;
  if (*end == 'i') end++;
  if (*end == 'B') end++;
  if (*end != '\0' || v == 0) return -1;
  *out = (size_t)v;
  return 0;
}

int parse_options(int argc, char **argv, struct options *o) {
  *o = (struct options){.provider = "tcp", .size = 4096, .qd = 1, .op = OP_READ, .seconds = 1.0,
                        .span = 64u << 20, .random = true};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool takes_value = true;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return 1;
    } else if (strcmp(a, "--verify") == 0) {
      o->verify = true, takes_value = false;
    } else if (strcmp(a, "--busy-poll") == 0) {
      o->busy_poll = true, takes_value = false;
    } else if (strcmp(a, "--mr-basic") == 0) {
      o->mr_basic = true, takes_value = false;
    } else if (strcmp(a, "--delivery-complete") == 0) {
      o->delivery = true, takes_value = false;
    } else if (v == NULL) {
      fprintf(stderr, "rma-ceiling: %s needs a value (or is unknown)\n%s", a, usage);
      return -1;
    } else if (strcmp(a, "--provider") == 0) {
      o->provider = v;
    } else if (strcmp(a, "--size") == 0 || strcmp(a, "--span") == 0) {
      if (parse_bytes(v, strcmp(a, "--size") == 0 ? &o->size : &o->span) != 0) {
        fprintf(stderr, "rma-ceiling: %s %s: expected bytes, e.g. 4096, 4K, 64M\n", a, v);
        return -1;
      }
    } else if (strcmp(a, "--qd") == 0) {
      char *end;
      unsigned long n = strtoul(v, &end, 10);
      if (*end != '\0' || n < 1 || n > 4096) {
        fprintf(stderr, "rma-ceiling: --qd %s: expected 1 to 4096\n", v);
        return -1;
      }
      o->qd = (unsigned)n;
    } else if (strcmp(a, "--op") == 0) {
      if (strcmp(v, "read") == 0) o->op = OP_READ;
      else if (strcmp(v, "write") == 0) o->op = OP_WRITE;
      else {
        fprintf(stderr, "rma-ceiling: --op %s: expected read or write\n", v);
        return -1;
      }
    } else if (strcmp(a, "--seconds") == 0) {
      char *end;
      o->seconds = strtod(v, &end);
      if (*end != '\0' || !(o->seconds > 0)) {
        fprintf(stderr, "rma-ceiling: --seconds %s: expected a positive number\n", v);
        return -1;
      }
    } else if (strcmp(a, "--pattern") == 0) {
      if (strcmp(v, "rand") == 0) o->random = true;
      else if (strcmp(v, "seq") == 0) o->random = false;
      else {
        fprintf(stderr, "rma-ceiling: --pattern %s: expected rand or seq\n", v);
        return -1;
      }
    } else {
      fprintf(stderr, "rma-ceiling: unknown flag %s\n%s", a, usage);
      return -1;
    }
    if (takes_value) i++;
  }
  // RDM-only providers (docs/transport.md "RDM endpoints").
  o->rdm = strcmp(o->provider, "shm") == 0 || strstr(o->provider, ";ofi_rx") != NULL || strcmp(o->provider, "efa") == 0;
  if (o->span < o->size) {
    fprintf(stderr, "rma-ceiling: --span (%zu) must hold at least one --size (%zu) block\n", o->span, o->size);
    return -1;
  }
  return 0;
}
