// Latency histogram: log-linear buckets (32 per power of two, so a
// percentile is within about 3% of the true value) in a fixed array, so
// recording allocates nothing and costs a few instructions in the loop.
#ifndef RMA_CEILING_HISTOGRAM_H
#define RMA_CEILING_HISTOGRAM_H

#include <stdint.h>

#define HISTOGRAM_SUB_BITS 5
#define HISTOGRAM_BUCKETS (64 << HISTOGRAM_SUB_BITS)

struct histogram {
  uint64_t counts[HISTOGRAM_BUCKETS];
  uint64_t n;
  uint64_t sum_ns;
  uint64_t max_ns;
};

void histogram_record(struct histogram *h, uint64_t ns);
// The value at percentile p (0..100), in ns: the middle of its bucket.
double histogram_percentile(const struct histogram *h, double p);

#endif
