/* heap: the per-thread allocator state: bins, pages, inbox and stash.
 *
 * Every live thread owns one heap. malloc pops from and free pushes to a
 * bin per size class: an array stack of blocks, so neither touches a page
 * or a counter on the fast path (fast.h); bins refill from and flush to pages
 * in batches. A thread starts pointing at a constant empty heap whose bins are
 * empty with no room, so the fast path needs no init check: the first malloc
 * falls into the thread box's slow path (thread.h), which gives the thread a
 * real heap. Fields of a
 * heap are touched only by its owner except the inbox (remote box), the
 * pool/list links (under the pool lock), and everything but the bins while
 * a collector holds the heap.
 *
 * Collection: a thread whose heap sits idle keeps blocks freed to it in its
 * inbox, and its empty pages. Another thread (the purge thread, or
 * malloc_trim) may claim the heap and give those back. The owner raises
 * `busy` around its slow paths with plain stores; a collector claims the
 * heap in `collector`, forces a barrier on every thread (membarrier), and
 * works only if the owner is not busy then; an owner that finds the heap
 * claimed waits. The fast paths touch only the bins, which collectors never
 * touch, so they take no part. */
#ifndef HZ_HEAP_H
#define HZ_HEAP_H

#include <stdbool.h>
#include <stddef.h>

#include "check.h"
#include "config.h"
#include "lock.h"
#include "page.h"
#include "remote.h"
#include "segment.h"
#include "sizeclass.h"
#include "stats.h"

typedef struct {
  hz_page_t *first;
  hz_page_t *last;
} hz_page_queue_t;

typedef enum {
  HZ_HEAP_EMPTY,    /* the constant heap of threads without one */
  HZ_HEAP_LIVE,     /* bound to a running thread */
  HZ_HEAP_POOLED,   /* waiting in the pool for a thread */
  HZ_HEAP_ABANDONED /* left behind in a fork child; never used again */
} hz_heap_state_t;

/* Empty pages a heap keeps per page kind (small, medium, wide, big) so that a
 * class which empties and refills pages does not go through its segment
 * each time, and a late free to a page just emptied is still told as a
 * double free. */
#define HZ_HEAP_SPARE_KINDS HZ_KIND_COUNT

/* Empty pages a heap keeps in its class queues for the next refills: up
 * to HZ_HEAP_EMPTY_BYTES, or HZ_HEAP_EMPTY_RATIO times the bytes of its
 * pages in use if more (beyond that an emptied page goes at once, and as
 * pages in use go the kept ones follow), each for at most
 * HZ_HEAP_EMPTY_AGE of the heap's slow paths. (mt_remote cross128 R90/T4,
 * 5 runs: ratio 1/2 held 231 MiB at 6.3M ops/s, 1 199 MiB at 6.7M, 2
 * 158 MiB at 7.7M; keeping every emptied page 146 MiB at 7.3M.) */
#define HZ_HEAP_EMPTY_BYTES ((size_t)4 << 20)
#define HZ_HEAP_EMPTY_RATIO 2
#define HZ_HEAP_EMPTY_AGE   4096u
/* The shared pages (one heap for every thread of a crowded program) keep
 * empty pages up to a quarter of their pages in use: their ups and downs
 * are the whole program's, which even out across its threads. */
#define HZ_HEAP_SHARED_EMPTY_DIVISOR 4

/* Bin capacity: HZ_BIN_SLOTS blocks (64: a refill takes half, 32 blocks
 * from one page's bitmap; with 32 slots hot_pair 16-1024 B random cost
 * 52.5 instructions per pair, with 64 50.0), or fewer for big blocks so a
 * bin holds at most about HZ_BIN_BYTES, but never fewer than HZ_BIN_MIN: a
 * refill takes half a bin from one page's bitmap, and a bin of 2 paid that
 * for one block (hot_pair, 70000-200000 B random: 158 instructions per
 * pair with 2, 129 with 4; a bin of 256 KiB blocks holds 1 MiB). */
#define HZ_BIN_SLOTS 64
#define HZ_BIN_BYTES ((size_t)512 << 10)
#define HZ_BIN_MIN   4

/* A bin is a stack of cached blocks living in the heap's slot array:
 * base[0 .. top) are cached, it is empty when top <= base and full when
 * top == limit. All three are NULL in the constant empty heap (no block,
 * no room). A collector may raise `base` of an idle heap's bin and take
 * the slots below (see hz_heap_collect); the owner's next slow path moves
 * what is left back to the start.
 *
 * The bin also counts what its thread did with the class, on the cache
 * line the fast path touches anyway, for the report to add up over every
 * heap. The frees are not counted one by one: every block a free puts in
 * the bin stays there until malloc pops it (counted below) or a slow path
 * moves it, so frees = free_base + blocks in the bin + allocs (mod 2^64),
 * where free_base is changed only by what moves blocks in or out other
 * than free and malloc (refill and drain: minus; spill and a collector:
 * plus). The frees that never reach the bin (another heap's blocks, which
 * go to the stash) are the class's remote frees (hz_class_counts_t), added
 * in when the frees are read. The free fast path counts nothing.
 *
 * The bin keeps its class's divisor too (sizeclass.h), so the free fast
 * path checks that a pointer is a block start without another cache line.
 * 64 bytes: malloc finds it at the offset the class tables hold, free at
 * its class shifted by 6.
 *
 * The allocation count is kept as a countdown, `sample_left`, which the
 * profiler also uses: the block whose pop brings it to 0 is sampled (prof
 * box). allocs = alloc_mark - sample_left (mod 2^64), and a sample moves
 * both. With the profiler off it counts down from 0 and would need 2^64
 * pops to come back. So counting and the sampling check are one
 * decrement and one branch. */
typedef struct {
  void **top;
  void **base;
  void **limit;
  /* base[0 .. fresh_end) hold no free mark and may be memory nobody
   * touched (hz_page_take's unmarked blocks): handed out with nothing
   * written into them. fresh_end <= top: a pop below it lowers it. */
  void **fresh_end;
  uint64_t alloc_mark;
  uint64_t free_base; /* see above: frees = free_base + count + allocs */
  /* hz_class_divisor of the class, its halves apart so each is one load */
  uint32_t inverse;
  uint32_t rotate;
  uint64_t sample_left;
} hz_bin_t;

/* What a thread counts per class off the fast path. `allocs` and `frees`
 * are its bin's counts as of its last slow path in the class, for other
 * threads to read (HZ_SHARED_SET); `published` is the part of
 * allocs - frees already added to the process-wide live count (stats
 * box), which keeps the peak. */
typedef struct {
  uint64_t allocs, frees;
  uint64_t remote_frees; /* blocks of other heaps' pages */
  uint64_t shared_frees; /* of those, the shared pages' (class heaps') */
  uint64_t run_frees;    /* of the others, frees that extended a run */
  uint64_t handed;       /* blocks its bin took from its own pages */
  int64_t published;
} hz_class_counts_t;

/* Add what `counts` say to a class's sum over every heap. */
HZ_INLINE void hz_class_counts_add(hz_class_stats_t *out,
                                   const hz_class_counts_t *counts) {
  out->allocs += HZ_SHARED_GET(counts->allocs);
  out->frees += HZ_SHARED_GET(counts->frees);
  out->remote_frees += HZ_SHARED_GET(counts->remote_frees);
}

_Static_assert(sizeof(hz_bin_t) == 64, "bins are indexed with a shift");

/* A heap's pages: what every owner of pages keeps, a thread's heap and a
 * class heap alike (class_heap.h), at the start of both, so that a
 * page's owner word names it whichever it is. Touched only by its owner
 * (the thread, or whoever holds the class heap's lock, or a collector
 * holding it) but the inbox, which other threads push to. */
typedef struct hz_pages_s {
  /* Pages of each class that may have free blocks; the first is the one
   * refills take from. */
  hz_page_queue_t queues[HZ_CLASS_COUNT];
  /* Pages with no free block left (all classes). */
  hz_page_queue_t full;
  hz_segment_set_t segments;   /* its own */
  hz_segment_set_t *cuts_from; /* where its pages are cut from: `segments`,
                                  or the set the class heaps share */
  hz_page_t *spare[HZ_HEAP_SPARE_KINDS]; /* empty pages, linked by next */
  uint8_t spare_count[HZ_HEAP_SPARE_KINDS];
  /* Empty pages kept in class queues: up to this many quarters of the
   * bytes in use (HZ_HEAP_EMPTY_BYTES at least). */
  uint8_t empty_quarters;
  /* Per class: its pages are not kept as they empty, but for the page
   * marked `for_probes` first in its queue: a thread's heap whose refills
   * of the class come from the shared pages (hz_heap_refills_shared), its
   * own pages of it lent to the class heap (heap_lend.c). */
  bool keeps_none[HZ_CLASS_COUNT];
  bool gone;          /* collected whole, no owner: its pages go at once */
  size_t empty_bytes; /* of the empty pages kept in class queues */
  size_t kept_bytes;  /* those and the spare pages: read by the stats */
  size_t busy_bytes;  /* of its pages with a block in use (or in a bin) */
  hz_heap_stats_t stats;
  /* Its owner's slow paths so far: the clock of the empty pages' age,
   * and what a collector watches for idleness. */
  _Alignas(64) _Atomic uint32_t activity;
  uint32_t collect_seen;  /* collector's: activity when it last looked */
  uint64_t idle_since_ms; /* collector's: when it saw that activity first */
  bool collect_clean;     /* collector's: nothing left after a full one */
  /* Blocks other threads freed to its pages (written by them). */
  _Alignas(64) hz_inbox_t inbox;
} hz_pages_t;

typedef struct hz_heap_s {
  /* Its pages, first: a page's owner word names the heap. */
  hz_pages_t pages;
  /* Fast path: the blocks malloc pops, per class. Heaps are 64-byte
   * aligned: pages keep flags in the low bits of their owner word. */
  _Alignas(64) hz_bin_t bins[HZ_CLASS_COUNT];
  void *bin_slots[HZ_CLASS_COUNT][HZ_BIN_SLOTS];
  hz_class_counts_t counts[HZ_CLASS_COUNT];
  /* A bin of small blocks' frees (hz_bin_frees) at its last refill: the
   * next refill fills it whole when none came in since. */
  uint64_t refill_frees[HZ_CLASS_COUNT];
  /* Lent pages (heap_lend.c): its pages lent to the class heaps and
   * not back yet, and those given back, for its next slow path or a
   * collector to give back to their segments (linked by `next`; written
   * by the class heaps). While any is out the heap is not retired: its
   * set is where they go back. */
  _Alignas(64) _Atomic uint32_t lent;
  _Atomic(struct hz_page_s *) returned;
  _Alignas(64) hz_stash_t stash; /* our frees bound for other heaps */
  /* Written by its thread or under the pool lock; a collector holding the
   * heap may read it meanwhile (HZ_SHARED_GET), a new thread adopting a
   * pooled heap sets it before it waits for the collector to let go. */
  hz_heap_state_t state;
  /* Collection handshake (see the top of this file). */
  _Alignas(64) _Atomic uint8_t busy; /* owner inside a slow path */
  _Atomic uintptr_t collector;       /* claiming collector's token, or 0 */
  bool bins_stolen;                  /* a collector raised some bin's base */
  /* Per class: a collector took the bin's slots below this (NULL: none). */
  void **stolen_end[HZ_CLASS_COUNT];
  /* Frees that extended the stash's open run, not yet in `counts`: the
   * run's class, and whether its page is one of the shared pages. */
  uint8_t run_class;
  bool run_shared;
  uint32_t run_frees;
  /* Per class: the full queue still has pages of it to lend (its refills
   * come from the shared pages: hz_heap_refills_shared). */
  bool lend_full[HZ_CLASS_COUNT];
  /* Links of the thread box's lists, under its pool lock. */
  struct hz_heap_s *next_all, *prev_all;       /* every heap not retired */
  struct hz_heap_s *next_pooled, *prev_pooled; /* heaps waiting for a thread */
} hz_heap_t;

extern const hz_heap_t hz_heap_empty;

/* The heap's refills of `cls` come from the shared pages (class_heap.h):
 * its own pages of the class only empty, and it keeps none of them. */
HZ_INLINE bool hz_heap_refills_shared(const hz_heap_t *heap, uint8_t cls) {
  return heap->pages.keeps_none[cls];
}
extern HZ_TLS hz_heap_t *hz_heap_tls;

HZ_INLINE hz_heap_t *hz_heap_current(void) { return hz_heap_tls; }

/* The heap bound to the calling thread (the thread box binds it with
 * hz_heap_tls), NULL for a thread without one. While the owner is inside a
 * slow path of its heap (hz_heap_enter to hz_heap_leave), hz_heap_tls is
 * the empty heap instead: a signal handler's malloc or free that
 * interrupted the slow path falls into the thread box's slow paths, never
 * onto bins, a stash or pages the slow path has half changed. */
extern HZ_TLS hz_heap_t *hz_heap_own;

/* The thread's heap is hidden inside a slow path: its fast paths, which
 * read `heap` (hz_heap_tls), see the empty heap though it has one. */
HZ_INLINE bool hz_heap_hidden(const hz_heap_t *heap) {
  return heap == &hz_heap_empty && hz_heap_own != NULL;
}

/* The calling thread is inside the allocator where a malloc or free must
 * not go its usual way: it holds or waits for one of the allocator's locks,
 * or its heap (`heap`, what the fast path read) is inside a slow path. Only
 * a signal handler that interrupted the allocator finds this; its calls
 * then take the routes that need no lock and leave the heap alone
 * (hz_heap_free_inside, the thread box's, the large box's fresh mappings).
 * The slow paths ask for the lock count first, and for the heap hidden
 * only where they find the empty heap. */
/* [condition: inside-allocator] */
HZ_INLINE bool hz_heap_inside(const hz_heap_t *heap) {
  return hz_lock_depth != 0 || hz_heap_hidden(heap);
}

/* A free by a thread inside the allocator (hz_heap_inside): p, of the page
 * `page` (its first slice's) of `seg`, checked and then sent where no lock
 * and none of the thread's own heap is needed: a small block to its page's
 * owner's inbox (as a thread without a heap frees), a large block's
 * mapping straight back to the kernel. */
void hz_heap_free_inside(hz_segment_t *seg, hz_page_t *page, void *p);

/* A small block from the heap's bins and pages (refilling them), or NULL
 * when out of memory. */
void *hz_heap_malloc_small(hz_heap_t *heap, size_t size);
/* The same, with the bin of the class filled (when empty) from the pages
 * of its class heap (class_heap.h; `probed`: the class takes probes, and
 * the heap keeps the page they come from). */
void *hz_heap_malloc_shared(hz_heap_t *heap, size_t size, bool probed);
/* The same as hz_heap_malloc_small for a probe of a shared class: the
 * bin of the class (empty) from the heap's own pages, the class still
 * refilling from the shared pages. */
void *hz_heap_malloc_probe(hz_heap_t *heap, size_t size);
/* The same, with the bin of the class (empty) filled from blocks[0..n),
 * the shared pages' blocks the ladder held (cpu_cache box), as entries
 * (below). */
void *hz_heap_malloc_given(hz_heap_t *heap, size_t size, void *const *blocks,
                           unsigned n);
/* The bin of p's class is full as p, a block of `page`, is freed into it:
 * the older half of the bin leaves, the heap's own blocks onto their pages
 * and the shared pages' into out[] as entries (how many: at most
 * HZ_BIN_SLOTS / 2, for the ladder to take; out NULL: home to their class
 * heaps), then p goes in. */
unsigned hz_heap_free_spilling(hz_heap_t *heap, hz_page_t *page, void *p,
                               void **out);
/* The shared pages' entries blocks[0..n), free, home to their class heap
 * through the stash (the ladder's last rung). */
void hz_heap_send_shared(hz_heap_t *heap, void *const *blocks, unsigned n);

/* An entry of the ladder: a free block of the shared pages, its low bit
 * set when the block holds no free mark (a bin's below its fresh_end,
 * never handed out, maybe memory nobody touched): the bin that takes it
 * keeps it below its own fresh_end, and nothing is written into it. The
 * ladder carries entries and never reads them. */
#define HZ_ENTRY_UNMARKED ((uintptr_t)1)

HZ_INLINE void *hz_entry_of(void *block, bool marked) {
  return marked ? block : (void *)((uintptr_t)block | HZ_ENTRY_UNMARKED);
}

HZ_INLINE bool hz_entry_marked(const void *entry) {
  return ((uintptr_t)entry & HZ_ENTRY_UNMARKED) == 0;
}

HZ_INLINE void *hz_entry_block(const void *entry) {
  return (void *)((uintptr_t)entry & ~HZ_ENTRY_UNMARKED);
}
/* Every free the fast path did not finish. For the empty heap (a thread
 * without one) it returns the block to give a heap; otherwise NULL. */
struct hz_block_s *hz_heap_free_generic(hz_heap_t *heap, hz_segment_t *seg,
                                        hz_page_t *page, void *p);
/* Free a block, checked already, through `heap` (owner or not). */
void hz_heap_free_block(hz_heap_t *heap, hz_page_t *page,
                        struct hz_block_s *block);
/* A block of another heap's page with no flag, freed by a thread with a
 * heap: checked against the blocks that fit, then into the stash. */
void hz_heap_free_remote_plain(hz_heap_t *heap, hz_page_t *page, void *p);
/* A free by a thread with a heap to a page whose only flag is
 * HZ_PAGE_PURGED (its free blocks may have lost their marks): a block
 * whose bit is set, free on its page already, is reported; the others go
 * as on a page without the flag, onto the owner's bin or into the stash.
 * A pointer that is no block of the page handed out, or a block that
 * carries its mark, takes the generic path, which reports it. */
void hz_heap_free_purged(hz_heap_t *heap, hz_segment_t *seg, hz_page_t *page,
                         void *p);
/* The same for p that looked like the block extending the stash's open run
 * (hz_heap_extends_run, read outside the heap's slow path: checked again
 * inside it): a compare and a few stores. */
void hz_heap_free_next(hz_heap_t *heap, hz_page_t *page, void *p);

/* Does p, whose page's owner word is `word`, look like the block extending
 * the stash's open run? Its page then has the run's owner and no flag: a
 * plain page of another heap, and the run's page (a page with blocks in a
 * stash stays with its owner and its class). */
/* [condition: run-extends] */
HZ_INLINE bool hz_heap_extends_run(const hz_heap_t *heap, const void *p,
                                   uintptr_t word) {
  return hz_remote_extends(&heap->stash, p) && word == heap->stash.run_owner;
}
/* A thread with no heap and none to get: the block goes straight to its
 * owner's inbox. */
void hz_heap_free_orphan(hz_page_t *page, struct hz_block_s *block);
/* The owner frees block p of page into its bin, making room if full. */
void hz_heap_free_full_bin(void *p, hz_heap_t *heap, hz_page_t *page);
/* Report a free of p, a pointer into one of our pages that is no block
 * start there. */
void hz_heap_bad_free(const hz_page_t *page, const void *p);

/* The most blocks the bin holds. */
HZ_INLINE size_t hz_bin_capacity(const hz_bin_t *bin) {
  return (size_t)(bin->limit - bin->base);
}

/* Blocks the bin's thread has handed out so far. */
HZ_INLINE uint64_t hz_bin_allocs(const hz_bin_t *bin) {
  return bin->alloc_mark - bin->sample_left;
}

/* Hand out the block below `top` (the bin's top, which holds one) of
 * class `cls`, counted already. A block below fresh_end holds no mark:
 * nothing is written into it, so memory nobody touched takes its first
 * page fault where the program writes it, not inside malloc. */
HZ_INLINE void *hz_bin_take(hz_bin_t *bin, void **top, unsigned cls) {
  bin->top = --top;
  void *block = *top;
  if (HZ_VALGRIND) *top = NULL; /* memcheck's leak check sees no stale copy */
  if (HZ_SECURE || HZ_LIKELY(top >= bin->fresh_end))
    return hz_check_handing_out(block, cls);
  bin->fresh_end = top;
  return block;
}

/* The class's next malloc is a sample's (the guard's, or the profiler's):
 * the malloc slow path serves it. */
HZ_INLINE bool hz_bin_sample_due(const hz_bin_t *bin) {
  return bin->sample_left == 1;
}

HZ_INLINE bool hz_heap_sample_due(const hz_heap_t *heap, size_t cls) {
  return hz_bin_sample_due(&heap->bins[cls]);
}

/* The profiler's turn came in `bin` (which is not empty): hand out a
 * block and record it, `size` bytes asked for. */
void *hz_heap_malloc_sampled(hz_heap_t *heap, hz_bin_t *bin, size_t size);

_Static_assert(sizeof(hz_bin_t) == HZ_CLASS_LUT_SCALE,
               "the class tables hold the offset of a class's bin");

/* The owner frees block p of its page into the bin (whose top is `top`),
 * making room first if the bin is full. */
HZ_INLINE void hz_bin_put(hz_heap_t *heap, hz_bin_t *bin, void **top,
                          hz_page_t *page, void *p) {
  if (HZ_LIKELY(top != bin->limit)) {
    *top = p;
    bin->top = top + 1;
    return;
  }
  hz_heap_free_full_bin(p, heap, page);
}

/* The profiler is on: count down to a first sample in every class. */
void hz_heap_arm_sampling(hz_heap_t *heap);

/* Collection by another thread. How far a collector goes into a heap:
 * not at all; its inbox only (take it home, give back the pages that
 * empties, leave bins and free blocks alone); or everything. */
typedef enum {
  HZ_COLLECT_NONE,
  HZ_COLLECT_INBOX,
  HZ_COLLECT_FULL
} hz_collect_depth_t;
/* A live owner that took no slow path for this long is collected fully.
 * Python's threads take turns on the interpreter lock and often go 25 ms
 * without a slow path; collected after 25 ms (a purge delay of 100 ms)
 * they lost their bins and free blocks 320 times in 4 s, with 46,000
 * madvise calls. Its inbox goes home after the purge delay of idleness. */
#define HZ_IDLE_FULL_MS 250
/* How a collector asks for a heap: every heap, fully (trim); as its
 * idleness calls for (the purge thread's rounds); or a pooled heap the
 * pool keeps no more for threads to come, fully unless nothing came in
 * since it was last collected. */
typedef enum { HZ_CLAIM_ANY, HZ_CLAIM_IDLE, HZ_CLAIM_SURPLUS } hz_claim_t;
/* Claim the heap for the depth `how` and, for HZ_CLAIM_IDLE, its idleness
 * at `now_ms` (the caller's clock) call for, or NONE without claiming. A
 * live or pooled heap is looked at on each round: its owner's slow paths
 * since the last look restart its idle time; then the inbox goes home
 * after the purge delay whenever it holds blocks, and the rest after
 * HZ_IDLE_FULL_MS, once until new blocks arrive. A pooled heap is idle
 * from its park (a thread may adopt it, bins and all, meanwhile). */
hz_collect_depth_t hz_heap_claim(hz_heap_t *heap, uintptr_t token,
                                 hz_claim_t how, uint64_t now_ms);
/* After a barrier on every thread: true if the owner is outside its slow
 * paths, so the claim is exclusive until released. */
bool hz_heap_owner_quiet(hz_heap_t *heap);
/* What a collector takes from a claimed heap's bins: nothing; all but the
 * top block of each (a live owner's fast path may be using that one at this
 * very moment; only after a membarrier, and only with `purge`); or all of
 * them (a pooled heap, which no thread can adopt while it is claimed). */
typedef enum { HZ_BINS_KEEP, HZ_BINS_BELOW_TOP, HZ_BINS_ALL } hz_bins_take_t;
/* Give back what a claimed heap holds: publish its stash, take its inbox
 * home to the pages, return empty and spare pages, and what `bins` says of
 * its bins. With `purge` also the memory of free blocks in pages still in
 * use. */
void hz_heap_collect(hz_heap_t *heap, bool purge, hz_bins_take_t bins);
/* Blocks wait in the inbox (a collector may ask before it claims the
 * heap). */
HZ_INLINE bool hz_heap_has_incoming(const hz_heap_t *heap) {
  return hz_remote_pending(&heap->pages.inbox);
}
/* A thread that adopts a pooled heap waits here until no collector has it. */
void hz_heap_wait_unclaimed(hz_heap_t *heap);
void hz_heap_release_claim(hz_heap_t *heap);
/* A claimed heap, collected, holds nothing: no page, no block in a bin,
 * the stash, the inbox or the backlog. Then no page names it and no block
 * travels to it, so its memory can go. */
bool hz_heap_holds_nothing(const hz_heap_t *heap);
/* The owner gives back all it can, bins included, and the memory of the
 * free blocks in its pages (malloc_trim). */
void hz_heap_trim(hz_heap_t *heap);

/* Thread lifecycle (called by the thread box). A new heap, in memory that
 * is zeros (a fresh mapping): only the bins and the state are written, so
 * a bin's slots are touched when the class is first used (2,000 threads
 * each using a few classes held 40 KiB a heap when the whole heap was
 * cleared). */
void hz_heap_init(hz_heap_t *heap);
void hz_heap_flush(hz_heap_t *heap);
/* The exiting owner publishes its stash and counts and keeps its bins for
 * the thread that adopts the heap next (collectors take them otherwise). */
void hz_heap_park(hz_heap_t *heap);
/* The owner publishes its bins' counts of every class
 * (hz_heap_publish_counts). */
void hz_heap_publish_all(hz_heap_t *heap);
/* Add the heap's counters and per-class counts to `out` (the thread box
 * counts the heaps themselves). */
void hz_heap_summarize_one(const hz_heap_t *heap, hz_heap_summary_t *out);

/* fork: hold the pool lock across fork; in the child, pool the heaps of
 * threads that no longer exist. */
void hz_heap_fork_prepare(void);
void hz_heap_fork_parent(void);
void hz_heap_fork_child(hz_heap_t *survivor);

#endif
