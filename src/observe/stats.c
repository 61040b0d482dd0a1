/* stats: process-wide counters and the report printed by HZ_SHOW_STATS=1
 * and hz_stats_print(), or written as JSON (HZ_STATS_JSON).
 *
 * Per-class allocations and frees are counted by each thread in its bins
 * (heap box: frees derived from the bin's contents) and merged here. The
 * live count per class is kept from what threads publish on their slow
 * paths (every 64 blocks of change), so its peak is exact to within 64
 * blocks per thread; live at the
 * time of a report is exact once threads are joined: allocations -
 * frees. */
#include "stats.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "os.h"

static _Atomic uint64_t large_allocs, large_frees, large_reuses;
static _Atomic size_t large_live_bytes;
static _Atomic int64_t class_live[HZ_CLASS_COUNT];
static _Atomic int64_t class_peak[HZ_CLASS_COUNT];
static _Atomic uint64_t orphan_frees[HZ_CLASS_COUNT];
static _Atomic uint64_t orphan_cas_retries;

#define ADD(counter, n)                                                        \
  atomic_fetch_add_explicit(&(counter), (n), memory_order_relaxed)
#define SUB(counter, n)                                                        \
  atomic_fetch_sub_explicit(&(counter), (n), memory_order_relaxed)
#define GET(counter) atomic_load_explicit(&(counter), memory_order_relaxed)

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

static void peak_raise(_Atomic int64_t *peak, int64_t value) {
  int64_t seen = atomic_load_explicit(peak, memory_order_relaxed);
  while (value > seen &&
         !atomic_compare_exchange_weak_explicit(
             peak, &seen, value, memory_order_relaxed, memory_order_relaxed)) {
  }
}

void hz_stats_add_live(uint8_t cls, int64_t delta) {
  int64_t live = ADD(class_live[cls], delta) + delta;
  if (delta > 0) peak_raise(&class_peak[cls], live);
}

void hz_stats_count_orphan_free(uint8_t cls, unsigned cas_retries) {
  ADD(orphan_frees[cls], 1);
  if (cas_retries != 0) ADD(orphan_cas_retries, cas_retries);
  SUB(class_live[cls], 1);
}

size_t hz_stats_large_live_bytes(void) { return GET(large_live_bytes); }
size_t hz_stats_large_live_count(void) {
  return (size_t)(GET(large_allocs) - GET(large_frees));
}

void hz_stats_heap_add(hz_heap_stats_t *into, const hz_heap_stats_t *from) {
  into->pages_acquired += HZ_SHARED_GET(from->pages_acquired);
  into->pages_retired += HZ_SHARED_GET(from->pages_retired);
  into->batches_published += HZ_SHARED_GET(from->batches_published);
  into->bin_blocks_sent += HZ_SHARED_GET(from->bin_blocks_sent);
  into->inbox_drains += HZ_SHARED_GET(from->inbox_drains);
  into->drained_blocks += HZ_SHARED_GET(from->drained_blocks);
  into->drained_headers += HZ_SHARED_GET(from->drained_headers);
  into->slow_mallocs += HZ_SHARED_GET(from->slow_mallocs);
  into->collections += HZ_SHARED_GET(from->collections);
  into->bin_blocks_taken += HZ_SHARED_GET(from->bin_blocks_taken);
  into->live_publishes += HZ_SHARED_GET(from->live_publishes);
  into->pages_fresh_pending += HZ_SHARED_GET(from->pages_fresh_pending);
}

static double ratio(uint64_t a, uint64_t b) {
  return b == 0 ? 0.0 : (double)a / (double)b;
}

/* The kernel's high-water mark, read after RSS (reading can fault pages
 * in), and never below it. */
static size_t peak_rss(size_t rss) {
  size_t peak = hz_os_peak_rss();
  return peak > rss ? peak : rss;
}

/* One size class as the report shows it. */
typedef struct {
  uint64_t allocs, frees, remote_frees;
  int64_t live, peak;
} class_row_t;

/* Frees are counted where they land: a bin counts every block pushed onto
 * it, a stash every block it takes (the class's remote frees), and a free
 * without a heap as an orphan's. Blocks the ladder holds (CPU caches,
 * depots) left a bin and were counted there. */
static class_row_t class_row(const hz_heap_summary_t *h, int c) {
  const hz_class_stats_t *k = &h->classes[c];
  uint64_t orphans = GET(orphan_frees[c]); /* always another heap's block */
  class_row_t row = {.allocs = k->allocs,
                     .frees = k->frees + orphans,
                     .remote_frees = k->remote_frees + orphans,
                     .peak = GET(class_peak[c])};
  row.live = (int64_t)(row.allocs - row.frees);
  if (row.peak < row.live) row.peak = row.live;
  return row;
}

/* Where the free blocks wait, in the five places a free block can be:
 * its freeing thread's bin, that thread's stash (bound for another heap),
 * its owner's inbox, a CPU cache or depot, or back on its page. Pages count
 * all but the last as in use, so bins are what pages hold in use beyond
 * the program's live blocks and the blocks in the other three; a snapshot,
 * as good as the counts threads last published. */
typedef struct {
  uint64_t bins, stashes, inboxes, caches, pages;
} waiting_t;

static uint64_t at_least_zero(int64_t n) { return n > 0 ? (uint64_t)n : 0; }

static waiting_t waiting_of(const hz_heap_summary_t *h) {
  int64_t live = 0, remote = 0, orphans = 0;
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    live += class_row(h, c).live; /* orphans' frees out */
    remote += (int64_t)h->classes[c].remote_frees;
    orphans += (int64_t)GET(orphan_frees[c]);
  }
  int64_t caches = (int64_t)h->front.cached_blocks;
  int64_t published = (int64_t)h->counters.stash_published;
  int64_t sent = (int64_t)h->counters.bin_blocks_sent;
  int64_t stashes = remote + sent - published;
  int64_t inboxes = published + orphans - (int64_t)h->counters.drained_blocks;
  int64_t bins = (int64_t)h->blocks_live - live - stashes - inboxes - caches;
  return (waiting_t){at_least_zero(bins), at_least_zero(stashes),
                     at_least_zero(inboxes), (uint64_t)caches,
                     h->blocks_free_on_pages};
}

/* Remote frees over every class: those heaps counted (published in
 * batches) and those of threads without a heap (sent home one by one, each
 * a batch of its own). */
typedef struct {
  uint64_t frees, batches, one_by_one;
} remote_total_t;

static remote_total_t remote_total(const hz_heap_summary_t *h) {
  uint64_t orphans = 0, counted = 0;
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    orphans += GET(orphan_frees[c]);
    counted += h->classes[c].remote_frees;
  }
  return (remote_total_t){counted + orphans,
                          h->counters.batches_published + orphans, orphans};
}

/* Writes to cache lines other threads write too: what decides how the
 * allocator scales with cores. Counted where they happen, shown per
 * million operations (allocations and frees, small and large). */
typedef struct {
  uint64_t ops;
  uint64_t locks[HZ_LOCK_KINDS];
  uint64_t inbox_pushes;   /* CAS that published a list or a lone block */
  uint64_t cas_retries;    /* CAS that failed and went round again */
  uint64_t inbox_takes;    /* exchanges that took a whole inbox */
  uint64_t live_publishes; /* adds to the process-wide live counts */
} sync_total_t;

static const char *const lock_names[HZ_LOCK_KINDS] = {
    [HZ_LOCK_SEGMENT] = "segment",
    [HZ_LOCK_LARGE] = "large",
    [HZ_LOCK_POOL] = "pool",
    [HZ_LOCK_COLLECT] = "collect",
    [HZ_LOCK_CLASS_HEAP] = "class_heap",
};

static sync_total_t sync_total(const hz_heap_summary_t *h,
                               const hz_memory_summary_t *m) {
  sync_total_t t = {0};
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    class_row_t r = class_row(h, c);
    t.ops += r.allocs + r.frees;
  }
  t.ops += GET(large_allocs) + GET(large_frees);
  for (int k = 0; k < HZ_LOCK_KINDS; k++)
    t.locks[k] = m->locks_taken[k];
  t.inbox_pushes = remote_total(h).batches;
  t.cas_retries = h->counters.inbox_cas_retries + GET(orphan_cas_retries);
  t.inbox_takes = h->counters.inbox_drains;
  t.live_publishes = h->counters.live_publishes;
  return t;
}

static double per_mop(uint64_t n, uint64_t ops) {
  return ops == 0 ? 0.0 : (double)n * 1e6 / (double)ops;
}

static void report_sync(const hz_heap_summary_t *h,
                        const hz_memory_summary_t *m) {
  sync_total_t t = sync_total(h, m);
  hz_os_print("  shared writes  per million of %llu operations:",
              (unsigned long long)t.ops);
  for (int k = 0; k < HZ_LOCK_KINDS; k++)
    hz_os_print(" %s lock %.1f,", lock_names[k], per_mop(t.locks[k], t.ops));
  hz_os_print(" inbox pushes %.1f, CAS retries %.1f, inbox takes %.1f, live "
              "publishes %.1f\n",
              per_mop(t.inbox_pushes, t.ops), per_mop(t.cas_retries, t.ops),
              per_mop(t.inbox_takes, t.ops), per_mop(t.live_publishes, t.ops));
}

static void report_classes(const hz_heap_summary_t *h) {
  hz_os_print("  %-5s %8s %12s %12s %12s %10s %10s\n", "class", "block",
              "allocs", "frees", "remote", "live", "peak live");
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    class_row_t r = class_row(h, c);
    if (r.allocs == 0 && r.frees == 0) continue;
    hz_os_print("  %-5d %8zu %12llu %12llu %12llu %10lld %10lld\n", c,
                hz_sizeclass_block_size((uint8_t)c),
                (unsigned long long)r.allocs, (unsigned long long)r.frees,
                (unsigned long long)r.remote_frees, (long long)r.live,
                (long long)r.peak);
  }
}

void hz_stats_report(const hz_heap_summary_t *h, const hz_memory_summary_t *m) {
  const hz_heap_stats_t *c = &h->counters;
  hz_os_print("hakozuna: stats report\n");
  hz_os_print("  heaps          %zu (%zu pooled, %zu retired)\n",
              h->heaps_total, h->heaps_pooled, h->heaps_retired);
  hz_os_print("  small live     %zu blocks (bins included), %zu bytes, %zu "
              "pages in use\n",
              h->blocks_live, h->bytes_live, h->pages_in_use);
  hz_os_print("  pages          %llu acquired, %llu retired\n",
              (unsigned long long)c->pages_acquired,
              (unsigned long long)c->pages_retired);
  waiting_t w = waiting_of(h);
  hz_os_print(
      "  free blocks    %llu in bins, %llu in stashes, %llu in inboxes, "
      "%llu in CPU caches, %llu on pages\n",
      (unsigned long long)w.bins, (unsigned long long)w.stashes,
      (unsigned long long)w.inboxes, (unsigned long long)w.caches,
      (unsigned long long)w.pages);
  hz_os_print("  slow mallocs   %llu\n", (unsigned long long)c->slow_mallocs);
  remote_total_t remote = remote_total(h);
  hz_os_print("  remote frees   %llu in %llu batches (%.1f per batch; %llu one "
              "by one from threads without a heap)\n",
              (unsigned long long)remote.frees,
              (unsigned long long)remote.batches,
              ratio(remote.frees, remote.batches),
              (unsigned long long)remote.one_by_one);
  hz_os_print("  stash          a list waits %.1f us from its first block to "
              "its publish (mean of %llu lists timed)\n",
              ratio(c->stash_wait_ns, c->stash_lists_timed) / 1000.0,
              (unsigned long long)c->stash_lists_timed);
  hz_os_print("  inbox          %llu drains, %llu blocks (%.1f per drain, %.1f "
              "per header read); %llu pages taken fresh while it held "
              "blocks\n",
              (unsigned long long)c->inbox_drains,
              (unsigned long long)c->drained_blocks,
              ratio(c->drained_blocks, c->inbox_drains),
              ratio(c->drained_blocks, c->drained_headers),
              (unsigned long long)c->pages_fresh_pending);
  hz_os_print("  collected      %llu times by other threads, %llu blocks "
              "taken from bins\n",
              (unsigned long long)c->collections,
              (unsigned long long)c->bin_blocks_taken);
  hz_os_print("  large          %llu allocs (%llu from the cache), %llu frees, "
              "%zu bytes live\n",
              (unsigned long long)GET(large_allocs),
              (unsigned long long)GET(large_reuses),
              (unsigned long long)GET(large_frees), GET(large_live_bytes));
  const hz_front_end_stats_t *f = &h->front;
  hz_os_print("  shared ladder  %s: %llu classes share pages (%llu turns), "
              "batches %llu onto CPU caches, %llu from them, %llu into "
              "depots, %llu from them, %llu drains, %llu blocks held, %llu "
              "section restarts\n",
              f->name, (unsigned long long)f->shared_classes,
              (unsigned long long)f->class_turns,
              (unsigned long long)f->cache_gives,
              (unsigned long long)f->cache_takes,
              (unsigned long long)f->depot_puts,
              (unsigned long long)f->depot_takes, (unsigned long long)f->drains,
              (unsigned long long)f->cached_blocks,
              (unsigned long long)f->restarts);
  const hz_guard_stats_t *g = &m->guard;
  hz_os_print(
      "  guarded        1 malloc in %llu sampled (0: off), %llu guarded "
      "blocks so far, %llu of %llu slots in use, %llu errors "
      "reported\n",
      (unsigned long long)g->sample, (unsigned long long)g->allocs,
      (unsigned long long)g->in_use, (unsigned long long)g->slots,
      (unsigned long long)g->reports);
  hz_os_print("  cached         %zu large mappings (%zu bytes, %zu not yet "
              "purged), %zu empty segments, %zu bytes of free pages not yet "
              "purged, %zu bytes of empty pages heaps keep\n",
              m->large_cached, m->large_cached_bytes, m->large_dirty_bytes,
              m->segments_cached, m->dirty_bytes, h->bytes_kept_empty);
  hz_os_print("  segments       %zu live; arena %zu bytes reserved, %zu in "
              "use\n",
              m->segments, m->arena_reserved, m->arena_in_use);
  hz_os_print("  regions        %zu empty, %zu to 1/4 full, %zu to 1/2, %zu to "
              "3/4, %zu less than full, %zu full; %zu asked for huge pages\n",
              m->regions[0], m->regions[1], m->regions[2], m->regions[3],
              m->regions[4], m->regions[5], m->huge_regions);
  hz_os_stats_t os;
  hz_os_counts(&os);
  hz_os_print(
      "  os             %llu mmap, %llu munmap, %llu mremap, %llu "
      "madvise; %zu bytes mapped, %zu bytes purged\n",
      (unsigned long long)os.mmap_calls, (unsigned long long)os.munmap_calls,
      (unsigned long long)os.mremap_calls, (unsigned long long)os.madvise_calls,
      os.mapped_bytes, os.purged_bytes);
  size_t rss = hz_os_rss();
  uint64_t minor, major;
  hz_os_faults(&minor, &major);
  hz_os_print("  rss            %zu bytes (peak %zu), %zu in huge pages; "
              "%llu minor and %llu major page faults\n",
              rss, peak_rss(rss), hz_os_huge_bytes(), (unsigned long long)minor,
              (unsigned long long)major);
  report_sync(h, m);
  report_classes(h);
}

/* ---------------------------------------------------------------------------
 * JSON, built in a buffer on the stack (no allocation at exit)
 * ------------------------------------------------------------------------- */
typedef struct {
  char text[16384];
  size_t len;
} json_t;

__attribute__((format(printf, 2, 3))) static void
json_add(json_t *j, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(j->text + j->len, sizeof j->text - j->len, fmt, ap);
  va_end(ap);
  if (n > 0) j->len += (size_t)n;
  if (j->len >= sizeof j->text) j->len = sizeof j->text - 1;
}

static void json_classes(json_t *j, const hz_heap_summary_t *h) {
  json_add(j, "  \"classes\": [");
  const char *sep = "\n";
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    class_row_t r = class_row(h, c);
    if (r.allocs == 0 && r.frees == 0) continue;
    json_add(j,
             "%s    {\"class\": %d, \"block_size\": %zu, \"allocs\": %llu, "
             "\"frees\": %llu, \"remote_frees\": %llu, \"live\": %lld, "
             "\"peak_live\": %lld}",
             sep, c, hz_sizeclass_block_size((uint8_t)c),
             (unsigned long long)r.allocs, (unsigned long long)r.frees,
             (unsigned long long)r.remote_frees, (long long)r.live,
             (long long)r.peak);
    sep = ",\n";
  }
  json_add(j, "\n  ],\n");
}

/* "sync": the counts, and each per million operations. */
static void json_sync(json_t *j, const hz_heap_summary_t *h,
                      const hz_memory_summary_t *m) {
  sync_total_t t = sync_total(h, m);
  const char *names[] = {"inbox_pushes", "cas_retries", "inbox_takes",
                         "live_publishes"};
  uint64_t counts[] = {t.inbox_pushes, t.cas_retries, t.inbox_takes,
                       t.live_publishes};
  json_add(j, "  \"sync\": {\"ops\": %llu", (unsigned long long)t.ops);
  for (int per = 0; per < 2; per++) {
    const char *suffix = per ? "_per_mop" : "";
    for (int k = 0; k < HZ_LOCK_KINDS; k++)
      json_add(j, per ? ", \"%s_locks%s\": %.3f" : ", \"%s_locks%s\": %.0f",
               lock_names[k], suffix,
               per ? per_mop(t.locks[k], t.ops) : (double)t.locks[k]);
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
      json_add(j, per ? ", \"%s%s\": %.3f" : ", \"%s%s\": %.0f", names[i],
               suffix, per ? per_mop(counts[i], t.ops) : (double)counts[i]);
  }
  json_add(j, "},\n");
}

bool hz_stats_write_json(const char *path, const hz_heap_summary_t *h,
                         const hz_memory_summary_t *m) {
  static json_t j; /* 16 KiB: not on a thread's stack */
  j.len = 0;
  size_t rss = hz_os_rss();
  uint64_t minor, major;
  hz_os_faults(&minor, &major);
  hz_os_stats_t os;
  hz_os_counts(&os);
  const hz_heap_stats_t *c = &h->counters;
  json_add(&j, "{\n");
  json_classes(&j, h);
  json_add(&j,
           "  \"heaps\": %zu, \"heaps_pooled\": %zu, \"heaps_retired\": %zu,\n"
           "  \"pages_in_use\": %zu, \"pages_acquired\": %llu, "
           "\"pages_retired\": %llu,\n"
           "  \"segments\": %zu, \"segments_cached\": %zu, "
           "\"free_held_bytes\": %zu, \"empty_kept_bytes\": %zu,\n"
           "  \"arena_reserved\": %zu, \"arena_in_use\": %zu, "
           "\"huge_regions\": %zu,\n"
           "  \"regions_by_fill\": [%zu, %zu, %zu, %zu, %zu, %zu],\n",
           h->heaps_total, h->heaps_pooled, h->heaps_retired, h->pages_in_use,
           (unsigned long long)c->pages_acquired,
           (unsigned long long)c->pages_retired, m->segments,
           m->segments_cached, m->dirty_bytes, h->bytes_kept_empty,
           m->arena_reserved, m->arena_in_use, m->huge_regions, m->regions[0],
           m->regions[1], m->regions[2], m->regions[3], m->regions[4],
           m->regions[5]);
  waiting_t w = waiting_of(h);
  json_add(&j,
           "  \"free_waiting\": {\"bins\": %llu, \"stashes\": %llu, "
           "\"inboxes\": %llu, \"cpu_caches\": %llu, \"pages\": %llu},\n",
           (unsigned long long)w.bins, (unsigned long long)w.stashes,
           (unsigned long long)w.inboxes, (unsigned long long)w.caches,
           (unsigned long long)w.pages);
  const hz_front_end_stats_t *f = &h->front;
  json_add(&j,
           "  \"front_end\": {\"name\": \"%s\", \"shared_classes\": %llu, "
           "\"class_turns\": %llu, \"cache_gives\": %llu, "
           "\"cache_takes\": %llu, \"depot_puts\": %llu, "
           "\"depot_takes\": %llu, \"drains\": %llu, "
           "\"cached_blocks\": %llu, \"restarts\": %llu},\n",
           f->name, (unsigned long long)f->shared_classes,
           (unsigned long long)f->class_turns,
           (unsigned long long)f->cache_gives,
           (unsigned long long)f->cache_takes,
           (unsigned long long)f->depot_puts, (unsigned long long)f->depot_takes,
           (unsigned long long)f->drains, (unsigned long long)f->cached_blocks,
           (unsigned long long)f->restarts);
  const hz_guard_stats_t *g = &m->guard;
  json_add(&j,
           "  \"guard\": {\"sample\": %llu, \"allocs\": %llu, \"in_use\": "
           "%llu, \"slots\": %llu, \"reports\": %llu},\n",
           (unsigned long long)g->sample, (unsigned long long)g->allocs,
           (unsigned long long)g->in_use, (unsigned long long)g->slots,
           (unsigned long long)g->reports);
  remote_total_t remote = remote_total(h);
  json_add(&j,
           "  \"remote\": {\"frees\": %llu, \"batches\": %llu, "
           "\"one_by_one\": %llu, \"stash_wait_ns\": %llu, "
           "\"stash_lists_timed\": %llu, \"drains\": %llu, "
           "\"drained_blocks\": %llu, \"drained_headers\": %llu, "
           "\"pages_fresh_pending\": %llu},\n",
           (unsigned long long)remote.frees, (unsigned long long)remote.batches,
           (unsigned long long)remote.one_by_one,
           (unsigned long long)c->stash_wait_ns,
           (unsigned long long)c->stash_lists_timed,
           (unsigned long long)c->inbox_drains,
           (unsigned long long)c->drained_blocks,
           (unsigned long long)c->drained_headers,
           (unsigned long long)c->pages_fresh_pending);
  json_sync(&j, h, m);
  json_add(&j,
           "  \"large\": {\"allocs\": %llu, \"reuses\": %llu, \"frees\": "
           "%llu, \"live_bytes\": %zu, \"cached\": %zu, "
           "\"cached_bytes\": %zu},\n",
           (unsigned long long)GET(large_allocs),
           (unsigned long long)GET(large_reuses),
           (unsigned long long)GET(large_frees), GET(large_live_bytes),
           m->large_cached, m->large_cached_bytes);
  json_add(
      &j,
      "  \"os\": {\"mmap\": %llu, \"munmap\": %llu, \"mremap\": %llu, "
      "\"madvise\": %llu, \"mapped_bytes\": %zu, \"purged_bytes\": "
      "%zu},\n"
      "  \"rss_bytes\": %zu, \"peak_rss_bytes\": %zu, \"huge_bytes\": %zu,\n"
      "  \"minor_faults\": %llu, \"major_faults\": %llu\n}\n",
      (unsigned long long)os.mmap_calls, (unsigned long long)os.munmap_calls,
      (unsigned long long)os.mremap_calls, (unsigned long long)os.madvise_calls,
      os.mapped_bytes, os.purged_bytes, rss, peak_rss(rss), hz_os_huge_bytes(),
      (unsigned long long)minor, (unsigned long long)major);
  if (hz_os_write_file(path, j.text, j.len)) return true;
  hz_os_message("warning: could not write the stats to %s", path);
  return false;
}
