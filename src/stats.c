/* stats: process-wide counters and the report printed by HZ_SHOW_STATS=1
 * and hz_stats_print(). */
#include "stats.h"

#include <stdatomic.h>

#include "os.h"

static _Atomic uint64_t mmap_calls, munmap_calls, mremap_calls, madvise_calls;
static _Atomic size_t mapped_bytes, discarded_bytes;
static _Atomic uint64_t large_allocs, large_frees, large_reuses;
static _Atomic size_t large_live_bytes;

#define ADD(counter, n)                                                        \
  atomic_fetch_add_explicit(&(counter), (n), memory_order_relaxed)
#define SUB(counter, n)                                                        \
  atomic_fetch_sub_explicit(&(counter), (n), memory_order_relaxed)
#define GET(counter) atomic_load_explicit(&(counter), memory_order_relaxed)

void hz_stats_count_mmap(size_t bytes) {
  ADD(mmap_calls, 1);
  ADD(mapped_bytes, bytes);
}
void hz_stats_count_munmap(size_t bytes) {
  ADD(munmap_calls, 1);
  SUB(mapped_bytes, bytes);
}
void hz_stats_count_mremap(size_t unmapped, size_t mapped) {
  ADD(mremap_calls, 1);
  ADD(mapped_bytes, mapped);
  SUB(mapped_bytes, unmapped);
}
void hz_stats_count_madvise(size_t bytes) {
  ADD(madvise_calls, 1);
  ADD(discarded_bytes, bytes);
}
void hz_stats_count_large_alloc(size_t bytes) {
  ADD(large_allocs, 1);
  ADD(large_live_bytes, bytes);
}
void hz_stats_count_large_reuse(void) { ADD(large_reuses, 1); }
void hz_stats_count_large_resize(size_t old_bytes, size_t new_bytes) {
  ADD(large_live_bytes, new_bytes);
  SUB(large_live_bytes, old_bytes);
}
void hz_stats_count_large_free(size_t bytes) {
  ADD(large_frees, 1);
  SUB(large_live_bytes, bytes);
}

size_t hz_stats_mapped_bytes(void) { return GET(mapped_bytes); }
void hz_stats_os(hz_os_stats_t *out) {
  out->mmap_calls = GET(mmap_calls);
  out->munmap_calls = GET(munmap_calls);
  out->mremap_calls = GET(mremap_calls);
  out->madvise_calls = GET(madvise_calls);
  out->mapped_bytes = GET(mapped_bytes);
  out->purged_bytes = GET(discarded_bytes);
}
size_t hz_stats_large_live_bytes(void) { return GET(large_live_bytes); }
size_t hz_stats_large_live_count(void) {
  return (size_t)(GET(large_allocs) - GET(large_frees));
}

void hz_stats_heap_add(hz_heap_stats_t *into, const hz_heap_stats_t *from) {
  into->pages_acquired += from->pages_acquired;
  into->pages_retired += from->pages_retired;
  into->remote_frees += from->remote_frees;
  into->batches_published += from->batches_published;
  into->inbox_drains += from->inbox_drains;
  into->drained_blocks += from->drained_blocks;
  into->slow_mallocs += from->slow_mallocs;
  into->collections += from->collections;
  into->bin_blocks_taken += from->bin_blocks_taken;
}

static double ratio(uint64_t a, uint64_t b) {
  return b == 0 ? 0.0 : (double)a / (double)b;
}

void hz_stats_report(const hz_heap_summary_t *h, const hz_memory_summary_t *m) {
  const hz_heap_stats_t *c = &h->counters;
  hz_os_print("hakozuna: stats report\n");
  hz_os_print("  heaps          %zu (%zu pooled)\n", h->heaps_total,
              h->heaps_pooled);
  hz_os_print("  small live     %zu blocks (bins included), %zu bytes, %zu "
              "pages in use\n",
              h->blocks_live, h->bytes_live, h->pages_in_use);
  hz_os_print("  pages          %llu acquired, %llu retired\n",
              (unsigned long long)c->pages_acquired,
              (unsigned long long)c->pages_retired);
  hz_os_print("  slow mallocs   %llu\n", (unsigned long long)c->slow_mallocs);
  hz_os_print("  remote frees   %llu in %llu batches (%.1f per batch)\n",
              (unsigned long long)c->remote_frees,
              (unsigned long long)c->batches_published,
              ratio(c->remote_frees, c->batches_published));
  hz_os_print("  inbox          %llu drains, %llu blocks (%.1f per drain)\n",
              (unsigned long long)c->inbox_drains,
              (unsigned long long)c->drained_blocks,
              ratio(c->drained_blocks, c->inbox_drains));
  hz_os_print("  collected      %llu times by other threads, %llu blocks "
              "taken from bins\n",
              (unsigned long long)c->collections,
              (unsigned long long)c->bin_blocks_taken);
  hz_os_print("  large          %llu allocs (%llu from the cache), %llu frees, "
              "%zu bytes live\n",
              (unsigned long long)GET(large_allocs),
              (unsigned long long)GET(large_reuses),
              (unsigned long long)GET(large_frees), GET(large_live_bytes));
  hz_os_print("  cached         %zu large mappings (%zu bytes, %zu not yet "
              "purged), %zu empty segments, %zu bytes of free pages not yet "
              "purged\n",
              m->large_cached, m->large_cached_bytes, m->large_dirty_bytes,
              m->segments_cached, m->dirty_bytes);
  hz_os_print("  segments       %zu live\n", m->segments);
  hz_os_print("  os             %llu mmap, %llu munmap, %llu mremap, %llu "
              "madvise; %zu bytes mapped, %zu bytes purged\n",
              (unsigned long long)GET(mmap_calls),
              (unsigned long long)GET(munmap_calls),
              (unsigned long long)GET(mremap_calls),
              (unsigned long long)GET(madvise_calls), GET(mapped_bytes),
              GET(discarded_bytes));
  hz_os_print("  rss            %zu bytes\n", hz_os_rss());
}
