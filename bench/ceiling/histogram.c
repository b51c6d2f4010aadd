#include "histogram.h"

#include <math.h>

static unsigned bucket_of(uint64_t v) {
  if (v < (1u << HISTOGRAM_SUB_BITS)) return (unsigned)v;
  unsigned msb = 63u - (unsigned)__builtin_clzll(v);
  unsigned shift = msb - HISTOGRAM_SUB_BITS;
  return ((shift + 1) << HISTOGRAM_SUB_BITS) + (unsigned)((v >> shift) & ((1u << HISTOGRAM_SUB_BITS) - 1));
}

void histogram_record(struct histogram *h, uint64_t ns) {
  h->counts[bucket_of(ns)]++;
  h->n++;
  h->sum_ns += ns;
  if (ns > h->max_ns) h->max_ns = ns;
}

double histogram_percentile(const struct histogram *h, double p) {
  if (h->n == 0) return 0;
  uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->n);
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (unsigned b = 0; b < HISTOGRAM_BUCKETS; b++) {
    seen += h->counts[b];
    if (seen < rank) continue;
    if (b < (1u << HISTOGRAM_SUB_BITS)) return b;
    unsigned shift = (b >> HISTOGRAM_SUB_BITS) - 1;
    double low = (double)(((uint64_t)(1u << HISTOGRAM_SUB_BITS) + (b & ((1u << HISTOGRAM_SUB_BITS) - 1))) << shift);
    return low + (double)((uint64_t)1 << shift) / 2;
  }
  return (double)h->max_ns;
}
