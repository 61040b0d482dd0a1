/* cpu_cache: the per-CPU front end for small blocks (up to 32 KiB), on
 * glibc's own rseq registration (x86-64). A free pushes the block onto the
 * cache of the CPU it runs on, whichever heap owns it; a malloc pops from
 * that cache. Each push and pop is a restartable sequence whose only store
 * the kernel lets stand is the cache's new top: a thread preempted,
 * migrated or signalled inside starts it again. A cache that runs empty
 * takes a batch from its class's depot, else from the thread's heap; one
 * that fills gives a batch to the depot, else back to the thread's heap,
 * which sends other heaps' blocks home. Where rseq is not there (valgrind,
 * GLIBC_TUNABLES=glibc.pthread.rseq=0, old kernels, other architectures),
 * with the profiler or in the secure and debug variants, hz_cpu_cache_on
 * stays false and the per-thread heaps run alone.
 *
 * Invariant: a block is in exactly one place: a CPU cache (below its top),
 * a depot batch, a heap's bin or batch, or its page; blocks in CPU caches
 * and depots count as in use on their pages. */
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
/* Blocks move between a cache and a depot or heap a batch at a time: half
 * the class's stack, at most HZ_CPU_BATCH blocks. */
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
/* What the caches do with a class now, one load on the fast paths: off
 * (the per-thread heaps alone: the front end is off, the class is too
 * large, threads exit faster than they run, or a class above 256 B in a
 * crowded program that shares no pages), cached (frees of other heaps'
 * blocks go in, mallocs take them), take only (a one-way class: frees go
 * home past the caches, mallocs still take what is there), or shared (the
 * program shares pages: only their blocks go in, other heaps' go home).
 * Start-up and the purge thread's rounds set it (cpu_cache.c). */
typedef enum {
  HZ_CPU_CLASS_OFF,
  HZ_CPU_CLASS_CACHED,
  HZ_CPU_CLASS_TAKE_ONLY,
  HZ_CPU_CLASS_SHARED /* cached, the shared pages' blocks only (central) */
} hz_cpu_class_mode_t;
extern uint8_t hz_cpu_mode[HZ_CLASS_COUNT];
/* Where the shared pages' heaps lie while classes are SHARED: their owner
 * words, less the base, are below the span. */
extern uintptr_t hz_cpu_shared_base, hz_cpu_shared_span;

/* The sections name these two in their text (hidden symbols, one load
 * each): where the caches start, and where in the rseq area the id that
 * picks one lies (mm_cid, else cpu_id). */
extern hz_cpu_cache_t *hz_cpu_caches;
extern long hz_cpu_id_offset;
/* glibc's __rseq_offset, copied at start-up so a section reads it with one
 * load: the thread's rseq area is at %fs:hz_cpu_rseq_offset. */
extern long hz_cpu_rseq_offset;
extern HZ_TLS uint64_t hz_cpu_restarts;

/* Decide at start-up (after the options and the profiler): on where rseq
 * and membarrier work, the variant is release and HZ_CPU_CACHE allows. */
void hz_cpu_cache_init(void);

/* This CPU's cache of class `cls` was found empty: a batch from the
 * class's depot, one block returned and the rest pushed; NULL when the
 * depot has none either (the thread's heap serves the malloc). */
void *hz_cpu_refill(hz_heap_t *heap, size_t cls);
/* This CPU's cache of class `cls` was found full when block p was freed:
 * a batch of it to the depot, else back to the heaps, then p in. */
void hz_cpu_overflow(hz_heap_t *heap, size_t cls, void *p);
/* More threads hold a heap than WIDE_THREADS_PER_CPU a CPU (cpu_cache.c):
 * the program is crowded (false without the front end). */
bool hz_cpu_crowded(size_t threads);
/* More threads hold a heap than HZ_SHARED_PAGES a CPU: a program whose
 * threads free each other's blocks takes the shared pages (central box). */
bool hz_cpu_sharing(size_t threads);
/* What the heaps published of each class's frees since the last look:
 * all, and those of other threads' heaps' blocks (not the shared pages')
 * that went through a stash (not onto the caches). */
typedef struct {
  uint64_t remote[HZ_CLASS_COUNT];
  uint64_t frees[HZ_CLASS_COUNT];
  /* Of `remote`, those a heap made that also allocated the class since
   * (the smaller of the two, summed over heaps): near 0 where the threads
   * that free other heaps' blocks of the class never allocate it (a
   * producer and its consumers). */
  uint64_t crossed[HZ_CLASS_COUNT];
  /* Of `remote`, those that extended a run (remote.h). */
  uint64_t runs[HZ_CLASS_COUNT];
} hz_cpu_frees_t;

/* Look at every class afresh, `threads` threads holding a heap now and
 * `exits` threads gone since the last look: the purge thread's rounds.
 * `shared` (not NULL): the crowded program's small blocks come from the
 * shared pages (central box) of the heaps in [shared, shared + span); every
 * class caches their blocks
 * and sends other heaps' home, whose pages then empty. `seen` (NULL:
 * nothing seen) tells which classes free locally (see HZ_CPU_LOCAL_SHARE
 * in cpu_cache.c). True when a class just went off (crowded, threads
 * exiting, local): what the caches hold is to go home
 * (hz_cpu_cache_drain). */
bool hz_cpu_cache_rejudge(size_t threads, size_t exits, const void *shared,
                          size_t span, const hz_cpu_frees_t *seen);

/* Empty every CPU cache and depot into the calling thread's heap (trim,
 * an idle process). */
void hz_cpu_cache_drain(hz_heap_t *heap);

/* fork: the depots' locks. */
void hz_cpu_cache_fork_prepare(void);
void hz_cpu_cache_fork_parent(void);
void hz_cpu_cache_fork_child(void);

/* The front end for the stats report (this thread's restarts included,
 * and the blocks caches and depots hold now, by class: frees the heaps did
 * not count), the blocks they hold in all, and a thread's restarts kept
 * when it exits. */
void hz_cpu_cache_stats(hz_front_end_stats_t *out);
uint64_t hz_cpu_cache_blocks(void);
void hz_cpu_cache_thread_exit(void);

#if defined(__x86_64__)
/* A section's descriptor (struct rseq_cs: version, flags, start, length,
 * abort handler), and the store of its address into the thread's
 * rseq_cs field (offset 8 in the area at %fs:rs) that arms it. */
#define HZ_RSEQ_ARM(start, end, abort)                                         \
  ".pushsection __rseq_cs, \"aw\"\n\t"                                         \
  ".balign 32\n\t"                                                             \
  "9:\n\t"                                                                     \
  ".long 0, 0\n\t"                                                             \
  ".quad " #start "f, (" #end "f - " #start "f), " #abort "f\n\t"              \
  ".popsection\n\t"                                                            \
  "leaq 9b(%%rip), %%rax\n\t"                                                  \
  "movq %%rax, %%fs:8(%[rs])\n\t"

/* The abort handler, preceded by the signature glibc registered
 * (RSEQ_SIG, 0x53053053, as the operand of an ud1 instruction). */
#define HZ_RSEQ_ABORT(abort, label)                                            \
  ".pushsection __rseq_failure, \"ax\"\n\t"                                    \
  ".byte 0x0f, 0xb9, 0x3d\n\t"                                                 \
  ".long 0x53053053\n\t" #abort ":\n\t"                                        \
  "jmp %l[" #label "]\n\t"                                                     \
  ".popsection\n\t"

/* The CPU's cache into rax (its id shifted by the stride, plus the base),
 * and r11 at its class's row of slots; the flags say whether it is
 * closed. */
#define HZ_RSEQ_CACHE                                                          \
  "movq hz_cpu_id_offset(%%rip), %%rcx\n\t"                                    \
  "movl %%fs:(%[rs],%%rcx), %%eax\n\t"                                         \
  "shlq %[log2], %%rax\n\t"                                                    \
  "addq hz_cpu_caches(%%rip), %%rax\n\t"                                       \
  "movq %[cls], %%r11\n\t"                                                     \
  "shlq %[row], %%r11\n\t"                                                     \
  "addq %%rax, %%r11\n\t"                                                      \
  "cmpl $0, %c[closed](%%rax)\n\t"

/* What every section reads, and what it changes. */
#define HZ_RSEQ_INPUTS(cls)                                                    \
  [rs] "r"(hz_cpu_rseq_offset), [cls] "r"(cls), [row] "i"(HZ_CPU_ROW_LOG2),    \
      [log2] "i"(HZ_CPU_CACHE_LOG2), [closed] "i"(HZ_CPU_CLOSED_OFFSET),       \
      [slots] "i"(HZ_CPU_SLOTS_OFFSET)
#define HZ_RSEQ_CLOBBERS "rax", "rcx", "r11", "memory", "cc"

/* The calling thread's rseq area is registered. A runtime that brings its
 * own rseq user may unregister glibc's: the kernel then leaves cpu_id at
 * -1 (RSEQ_CPU_ID_UNINITIALIZED) and mm_cid at 0, and restarts no
 * section, so such a thread takes the per-thread paths. */
HZ_INLINE bool hz_cpu_registered(void) {
  return *(volatile int32_t __seg_fs *)(hz_cpu_rseq_offset + 4) >= 0;
}

/* Pop a block of class `cls` from this CPU's cache; NULL when empty. The
 * block under it is prefetched for the next pop (a stale pointer, if
 * another section got there first, only wastes the prefetch). */
HZ_INLINE void *hz_cpu_pop(size_t cls) {
  void *out;
  goto start;
aborted:
  hz_cpu_restarts++;
start:
  __asm__ goto(HZ_RSEQ_ARM(1, 2, 4) "1:\n\t" HZ_RSEQ_CACHE "jne %l[empty]\n\t"
                                    "movl (%%rax,%[cls],4), %%ecx\n\t"
                                    "subl $1, %%ecx\n\t"
                                    "jb %l[empty]\n\t"
                                    "movq %c[slots](%%r11,%%rcx,8), %[out]\n\t"
                                    "movq %c[slots]-8(%%r11,%%rcx,8), %%r11\n\t"
                                    "prefetcht0 (%%r11)\n\t"
                                    "movl %%ecx, (%%rax,%[cls],4)\n\t"
                                    "2:\n\t" HZ_RSEQ_ABORT(4, aborted)
               : [out] "=&r"(out)
               : HZ_RSEQ_INPUTS(cls)
               : HZ_RSEQ_CLOBBERS
               : aborted, empty);
  if (out == NULL) __builtin_unreachable(); /* slots below top hold blocks */
  return out;
empty:
  return NULL;
}

/* Push block p of class `cls` onto this CPU's cache; false when full. */
HZ_INLINE bool hz_cpu_push(size_t cls, void *p) {
  goto start;
aborted:
  hz_cpu_restarts++;
start:
  __asm__ goto(HZ_RSEQ_ARM(1, 2, 4) "1:\n\t" HZ_RSEQ_CACHE "jne %l[full]\n\t"
                                    "movl (%%rax,%[cls],4), %%ecx\n\t"
                                    "cmpl %c[cap](%%rax,%[cls],4), %%ecx\n\t"
                                    "jae %l[full]\n\t"
                                    "movq %[p], %c[slots](%%r11,%%rcx,8)\n\t"
                                    "addl $1, %%ecx\n\t"
                                    "movl %%ecx, (%%rax,%[cls],4)\n\t"
                                    "2:\n\t" HZ_RSEQ_ABORT(4, aborted)
               :
               : HZ_RSEQ_INPUTS(cls), [p] "r"(p), [cap] "i"(HZ_CPU_CAP_OFFSET)
               : HZ_RSEQ_CLOBBERS
               : aborted, full);
  return true;
full:
  return false;
}
#else
HZ_INLINE bool hz_cpu_registered(void) { return false; }
HZ_INLINE void *hz_cpu_pop(size_t cls) {
  (void)cls;
  return NULL;
}
HZ_INLINE bool hz_cpu_push(size_t cls, void *p) {
  (void)cls, (void)p;
  return false;
}
#endif

/* A malloc of class `cls` may take from the caches (and their depot):
 * the class is not off, the thread is registered for rseq and its next
 * malloc is not a sample's, which the heap must serve. */
HZ_INLINE bool hz_cpu_serves(const hz_heap_t *heap, size_t cls) {
  return hz_cpu_mode[cls] != HZ_CPU_CLASS_OFF && hz_cpu_registered() &&
         !hz_heap_sample_due(heap, cls);
}

/* A free of block p of `page` (another heap's, plain) may go onto the
 * caches: its class is cached (for the shared pages' blocks only while it
 * is SHARED) and the thread is registered for rseq. */
HZ_INLINE bool hz_cpu_takes_free(const hz_page_t *page) {
  uint8_t mode = hz_cpu_mode[page->class_id];
  return (mode == HZ_CPU_CLASS_CACHED ||
          (mode == HZ_CPU_CLASS_SHARED &&
           hz_page_owner_word(page) - hz_cpu_shared_base <
               hz_cpu_shared_span)) &&
         hz_cpu_registered();
}

/* A block in a CPU cache or a depot carries its free mark in its second
 * word (check.h), stored by the free that pushed it after it found none
 * there: a block freed twice, whatever route the first free took, is
 * caught at the second. A malloc that pops a block checks the mark and
 * takes it off; a batch given back to the heaps checks it and keeps it
 * (the blocks are still free). A cached block found without its mark was
 * written after its free (or freed twice by two threads at the same
 * instant): reported and dropped, never handed out. */

/* Report a block that left the caches without its mark. */
void hz_cpu_unmarked(const void *p) __attribute__((cold));

/* Block p leaves the caches, still free: true when it carries its mark;
 * false when not (reported, and the caller drops it). */
HZ_INLINE bool hz_cpu_still_marked(const void *p) {
  if (HZ_LIKELY(hz_check_is_marked(p))) return true;
  hz_cpu_unmarked(p);
  return false;
}

/* Block p leaves the caches to be handed out: true, its mark taken off;
 * false when it had none (reported, dropped). */
HZ_INLINE bool hz_cpu_unmark(void *p) {
  if (HZ_UNLIKELY(!hz_cpu_still_marked(p))) return false;
  hz_check_clear_mark(p);
  return true;
}

#endif
