/* cpu_cache: the per-CPU rung of the shared pages' ladder (ladder.h), for
 * their blocks of up to 32 KiB, on glibc's own rseq registration (x86-64
 * and AArch64, cpu_cache.c). A bin that spills the shared pages' blocks
 * gives them to the cache of the CPU it runs on, and a bin of a shared
 * class that runs empty takes them back from there: a batch a time, each
 * move one restartable sequence whose only store the kernel lets stand is
 * the cache's new top (a thread preempted, migrated or signalled inside
 * starts it again). Past a full cache or an empty one is the class's
 * depot (depot.h), the ladder's next rung. Where rseq is not there (valgrind,
 * GLIBC_TUNABLES=glibc.pthread.rseq=0, old kernels, qemu-user, other
 * architectures),
 * with the profiler or in the secure and debug variants, hz_cpu_cache_on
 * stays false and the depots are the ladder's first rung.
 *
 * Invariant: a small block is in exactly one place: handed out; a bin of
 * the heap owning its page; a bin of any thread's heap, or a class heap's
 * bin of one slot (a shared page's block: class_heap.h); the freeing
 * thread's stash (a header, a name, or inside the open run); the
 * owner's inbox (a thread's heap's, or a class heap's); a CPU cache (below
 * its top); a depot batch; free on its page (its bit set); or never
 * handed out (the page's uncarved tail, or a bin's blocks below
 * fresh_end). Blocks in CPU caches and depots count as in use on their
 * pages and carry their free mark (check.h), but for those a bin gave as
 * unmarked entries (heap.h). docs/DESIGN.md tells each place. */
#ifndef HZ_CPU_CACHE_H
#define HZ_CPU_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "check.h"
#include "config.h"
#include "heap.h"
#include "stats.h"

/* Classes 1..HZ_CPU_CLASSES-1 (blocks up to HZ_CPU_BLOCK_MAX) have a
 * stack in every CPU's cache of HZ_CPU_SLOTS blocks, or fewer for larger
 * blocks, so a class holds at most about HZ_CPU_CLASS_BYTES a CPU. */
#define HZ_CPU_CLASSES     45
#define HZ_CPU_BLOCK_MAX   32768
#define HZ_CPU_SLOTS_LOG2  6
#define HZ_CPU_SLOTS       (1 << HZ_CPU_SLOTS_LOG2)
#define HZ_CPU_CLASS_BYTES ((size_t)256 << 10)
/* Blocks move between a bin and a cache, a depot or a heap a batch at a
 * time: half the class's stack, at most HZ_CPU_BATCH blocks. */
#define HZ_CPU_BATCH (HZ_CPU_SLOTS / 2)

/* One CPU's cache. `closed` is set while another thread drains it: every
 * section finds it empty (pop) or full (push). `cap` is each class's stack
 * size, the same on every CPU. Caches lie 2^HZ_CPU_CACHE_LOG2 bytes apart,
 * so a section finds its CPU's with a shift (the tail is never written and
 * takes no memory). The offsets are the sections' (asserted in
 * cpu_cache.c). */
#define HZ_CPU_CACHE_LOG2 15
#define HZ_CPU_HEAD_BYTES 384
typedef struct {
  uint32_t top[HZ_CPU_CLASSES];
  uint32_t closed;
  uint32_t cap[HZ_CPU_CLASSES];
  uint32_t pad[HZ_CPU_HEAD_BYTES / 4 - 2 * HZ_CPU_CLASSES - 1];
  void *slots[HZ_CPU_CLASSES][HZ_CPU_SLOTS];
  char tail[(1 << HZ_CPU_CACHE_LOG2) - HZ_CPU_HEAD_BYTES -
            HZ_CPU_CLASSES * HZ_CPU_SLOTS * sizeof(void *)];
} hz_cpu_cache_t;

#define HZ_CPU_CLOSED_OFFSET (4 * HZ_CPU_CLASSES)
#define HZ_CPU_CAP_OFFSET    (4 * HZ_CPU_CLASSES + 4)
#define HZ_CPU_SLOTS_OFFSET  HZ_CPU_HEAD_BYTES
/* A class's row of slots lies cls << HZ_CPU_ROW_LOG2 bytes into them. */
#define HZ_CPU_ROW_LOG2 (HZ_CPU_SLOTS_LOG2 + 3)

extern bool hz_cpu_cache_on;

/* The sections name these two in their text (hidden symbols, one load
 * each): where the caches start, and where in the rseq area the id that
 * picks one lies (mm_cid, else cpu_id). */
extern hz_cpu_cache_t *hz_cpu_caches;
extern long hz_cpu_id_offset;
/* glibc's __rseq_offset, copied at start-up so a section reads it with one
 * load: the thread's rseq area is at %fs:hz_cpu_rseq_offset (x86-64), at
 * the thread pointer plus it (AArch64). */
extern long hz_cpu_rseq_offset;
extern HZ_TLS uint64_t hz_cpu_restarts;

/* Decide at start-up (after the options and the profiler): on where rseq
 * and membarrier work, the variant is release and HZ_CPU_CACHE allows. */
void hz_cpu_cache_init(bool allowed);

/* Up to `want` (at most HZ_CPU_BATCH) blocks of class `cls` into out[],
 * from this CPU's cache; how many (0: empty, or the caches are off). */
unsigned hz_cpu_take(size_t cls, void **out, unsigned want);
/* blocks[0..n) (n at most HZ_CPU_BATCH) of class `cls` onto this CPU's
 * cache, as many as it has room for; how many it took, from the front
 * (the rest go down the ladder: the depot, the class heap). */
unsigned hz_cpu_give(size_t cls, void *const *blocks, unsigned n);
/* The class has a stack in the caches and a depot: up to 32 KiB. */
/* [condition: cpu-class] */
HZ_INLINE bool hz_cpu_class(size_t cls) { return cls < HZ_CPU_CLASSES; }

/* Empty every CPU cache into the calling thread's heap, home to the
 * class heaps (trim, an idle process). */
void hz_cpu_cache_drain(hz_heap_t *heap);

/* fork: the drain's lock. */
void hz_cpu_cache_fork_prepare(void);
void hz_cpu_cache_fork_parent(void);
void hz_cpu_cache_fork_child(void);

/* The caches' counts for the stats report (this thread's restarts
 * included, and the blocks the caches hold now, by class: counted as
 * freed by the bins they left), the blocks they hold in all, and a
 * thread's restarts kept when it exits. */
void hz_cpu_cache_stats(hz_front_end_stats_t *out);
uint64_t hz_cpu_cache_blocks(void);
void hz_cpu_cache_thread_exit(void);

#endif
