// The transport ceiling in C: fi_read or fi_write through libfabric directly,
// at a given size and queue depth, with no Node, addon or JavaScript in the
// way, so bench/peers can say how far rblk is from the transport itself
// rather than from our own RMA loop (issue 10, item 7). The process forks a
// passive peer on 127.0.0.1, connects to it, and prints one JSON line.
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "sides.h"

struct side_cpu {
  long long user_us, sys_us, switches;
};

static struct side_cpu cpu_between(const struct rusage *a, const struct rusage *b) {
  return (struct side_cpu){
      .user_us = (b->ru_utime.tv_sec - a->ru_utime.tv_sec) * 1000000LL + (b->ru_utime.tv_usec - a->ru_utime.tv_usec),
      .sys_us = (b->ru_stime.tv_sec - a->ru_stime.tv_sec) * 1000000LL + (b->ru_stime.tv_usec - a->ru_stime.tv_usec),
      .switches = (b->ru_nvcsw - a->ru_nvcsw) + (b->ru_nivcsw - a->ru_nivcsw),
  };
}

static void print_cpu(const char *name, const struct side_cpu *c, uint64_t ops) {
  double n = ops > 0 ? (double)ops : 1;
  printf("\"%s\":{\"userUs\":%lld,\"sysUs\":%lld,\"switches\":%lld,\"userUsPerOp\":%.3f,\"sysUsPerOp\":%.3f}", name,
         c->user_us, c->sys_us, c->switches, (double)c->user_us / n, (double)c->sys_us / n);
}

static void print_mr_mode(uint64_t m) {
  static const struct {
    uint64_t bit;
    const char *name;
  } bits[] = {{FI_MR_LOCAL, "FI_MR_LOCAL"},       {FI_MR_VIRT_ADDR, "FI_MR_VIRT_ADDR"},
              {FI_MR_ALLOCATED, "FI_MR_ALLOCATED"}, {FI_MR_PROV_KEY, "FI_MR_PROV_KEY"},
              {FI_MR_ENDPOINT, "FI_MR_ENDPOINT"}};
  printf("\"mrMode\":[");
  const char *sep = "";
  for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
    if (m & bits[i].bit) printf("%s\"%s\"", sep, bits[i].name), sep = ",";
  printf("]");
}

static void print_result(const struct options *o, const struct side *s, const struct loop_result *r,
                         const struct side_cpu *active, const struct side_cpu *passive, uint64_t verified) {
  double secs = (double)r->elapsed_ns / 1e9;
  const struct histogram *h = &r->latency;
  printf("{\"provider\":\"%s\",\"op\":\"%s\",\"size\":%zu,\"qd\":%u,\"pattern\":\"%s\",\"span\":%zu,\"waits\":\"%s\",\"completion\":\"%s\",",
         s->getinfo->fabric_attr->prov_name, op_name(o->op), o->size, o->qd, o->random ? "rand" : "seq", o->span,
         o->busy_poll || s->no_wait ? "busy-poll" : "fd", o->delivery && o->op == OP_WRITE ? "delivery" : "default");
  print_mr_mode(s->mr_mode);
  printf(",\"seconds\":%.6f,\"ops\":%" PRIu64 ",\"opsPerSec\":%.1f,\"mbps\":%.3f,", secs, r->ops,
         secs > 0 ? (double)r->ops / secs : 0, secs > 0 ? (double)r->ops * (double)o->size / secs / 1e6 : 0);
  printf("\"latencyUs\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"mean\":%.3f,\"max\":%.3f},",
         histogram_percentile(h, 50) / 1e3, histogram_percentile(h, 90) / 1e3, histogram_percentile(h, 99) / 1e3,
         h->n ? (double)h->sum_ns / (double)h->n / 1e3 : 0, (double)h->max_ns / 1e3);
  print_cpu("active", active, r->ops);
  putchar(',');
  print_cpu("passive", passive, r->ops);
  if (o->verify) printf(",\"verified\":{\"blocks\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", verified, verified * o->size);
  printf("}\n");
}

static int send_control(int fd, char c) {
  ssize_t n;
  do n = write(fd, &c, 1);
  while (n < 0 && errno == EINTR);
  return n == 1 ? 0 : fi_fail("write(control pipe)", -errno);
}

// The active side's life: connect, verify if asked, then the timed loop
// bracketed by 'S' and 'E' so both sides count CPU over the same window.
static int run_active(const struct options *o, int ctl_fd, FILE *report) {
  // Whole lines (fgets), not fscanf's "\n", which waits for the next non-blank byte.
  // "port N" (MSG) or "rdm NAME-HEX ADDR KEY LEN" (FI_EP_RDM, passive-side.c).
  char line[1024];
  char hex[2 * 256 + 1];
  unsigned port = 0;
  unsigned long long addr = 0, key = 0, len = 0;
  bool rdm = false;
  if (fgets(line, sizeof line, report) != NULL && sscanf(line, "rdm %512s %llx %llx %llx", hex, &addr, &key, &len) == 4) {
    rdm = true;
  } else if (sscanf(line, "port %u", &port) != 1) {
    fprintf(stderr, "rma-ceiling: the passive side did not start listening\n");
    return -FI_EOTHER;
  }
  struct side s = {0};
  struct remote_region remote = {.addr = addr, .key = key, .len = len};
  struct loop_result *r = calloc(1, sizeof *r);
  uint64_t verified = 0;
  int rc = r == NULL ? fi_fail("calloc", -FI_ENOMEM)
           : rdm     ? active_connect_rdm(o, hex, &s)
                     : active_connect(o, (uint16_t)port, &s, &remote);
  if (rc == 0 && o->verify) rc = active_verify(o, &s, &remote, &verified);
  struct rusage a, b;
  if (rc == 0) rc = send_control(ctl_fd, 'S');
  if (rc == 0) {
    getrusage(RUSAGE_SELF, &a);
    rc = active_loop(o, &s, &remote, r);
    getrusage(RUSAGE_SELF, &b);
  }
  if (rc == 0) rc = send_control(ctl_fd, 'E');
  struct side_cpu passive;
  if (rc == 0 && (fgets(line, sizeof line, report) == NULL ||
                  sscanf(line, "cpu %lld %lld %lld", &passive.user_us, &passive.sys_us, &passive.switches) != 3)) {
    fprintf(stderr, "rma-ceiling: the passive side did not report its CPU time\n");
    rc = -FI_EOTHER;
  }
  if (rc == 0) {
    struct side_cpu active = cpu_between(&a, &b);
    print_result(o, &s, r, &active, &passive, verified);
  }
  side_close(&s);
  free(r);
  return rc;
}

int main(int argc, char **argv) {
  struct options o;
  int rc = parse_options(argc, argv, &o);
  if (rc != 0) return rc > 0 ? 0 : 2;
  // A side that died must show up as a failed write to its pipe, which is
  // reported, rather than as a silent SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  int ctl[2], report[2];
  if (pipe2(ctl, O_CLOEXEC) != 0) return fi_fail("pipe2", -errno), 1;
  if (pipe2(report, O_CLOEXEC) != 0) {
    fi_fail("pipe2", -errno);
    close(ctl[1]);
    close(ctl[0]);
    return 1;
  }
  fflush(stdout);
  // Fork before any libfabric call: a provider's threads and sockets do not survive fork.
  pid_t child = fork();
  if (child < 0) {
    fi_fail("fork", -errno);
    close(report[1]);
    close(report[0]);
    close(ctl[1]);
    close(ctl[0]);
    return 1;
  }
  if (child == 0) {
    close(report[0]);
    close(ctl[1]);
    // The passive peer never outlives the run, however the parent ends.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(1);
    rc = passive_run(&o, ctl[0], report[1]);
    close(report[1]);
    close(ctl[0]);
    _exit(rc == 0 ? 0 : 1);
  }
  close(report[1]);
  close(ctl[0]);
  FILE *in = fdopen(report[0], "r");
  if (in == NULL) {
    rc = fi_fail("fdopen", -errno);
    close(report[0]);
  } else {
    rc = run_active(&o, ctl[1], in);
    fclose(in);
  }
  // End of file on the control pipe tells a child still waiting to leave.
  close(ctl[1]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (rc == 0) fprintf(stderr, "rma-ceiling: the passive side failed (status 0x%x)\n", status);
    rc = rc ? rc : -FI_EOTHER;
  }
  return rc == 0 ? 0 : 1;
}
