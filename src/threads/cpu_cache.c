/* cpu_cache: the per-CPU rung of the shared pages' ladder (see
 * cpu_cache.h): the restartable sections that move a batch between a bin
 * and this CPU's cache, the start-up decision, and draining every cache (membarrier with rseq: a section running on a
 * CPU whose cache is being closed is aborted). */
#define _GNU_SOURCE
#include "cpu_cache.h"

#include <linux/membarrier.h>
#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lock.h"
#include "options.h"
#include "os.h"
#include "segment.h"
#include "sizeclass.h"

#if defined(__x86_64__) || defined(__aarch64__)
#include <sys/rseq.h>
#endif

#ifndef AT_RSEQ_FEATURE_SIZE
#define AT_RSEQ_FEATURE_SIZE 27
#endif

_Static_assert(offsetof(hz_cpu_cache_t, closed) == HZ_CPU_CLOSED_OFFSET,
               "the sections read `closed` here");
_Static_assert(offsetof(hz_cpu_cache_t, cap) == HZ_CPU_CAP_OFFSET,
               "the push section reads `cap` here");
_Static_assert(offsetof(hz_cpu_cache_t, slots) == HZ_CPU_SLOTS_OFFSET,
               "the sections read the slots here");
_Static_assert(sizeof(hz_cpu_cache_t) == 1 << HZ_CPU_CACHE_LOG2,
               "the sections find a cache with a shift");
_Static_assert(sizeof(((hz_cpu_cache_t *)0)->slots[0]) == 1 << HZ_CPU_ROW_LOG2,
               "the sections find a row with a shift");

bool hz_cpu_cache_on;
hz_cpu_cache_t *hz_cpu_caches;
long hz_cpu_id_offset;
long hz_cpu_rseq_offset;
HZ_TLS uint64_t hz_cpu_restarts;
static uint64_t exited_restarts; /* of threads that exited */
static long cache_count;

/* A class's stack: HZ_CPU_SLOTS blocks, or as many as HZ_CPU_CLASS_BYTES
 * holds (16 KiB blocks: 16, 32 KiB: 8). */
static uint32_t class_stack(size_t cls) {
  size_t fit = HZ_CPU_CLASS_BYTES / hz_sizeclass_block_size((uint8_t)cls);
  return fit < HZ_CPU_SLOTS ? (uint32_t)fit : HZ_CPU_SLOTS;
}

/* ---------------------------------------------------------------------------
 * The sections (x86-64, AArch64)
 * ------------------------------------------------------------------------- */
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
#define HZ_RSEQ_CLOBBERS "rax", "rcx", "rdx", "r10", "r11", "memory", "cc"

/* The calling thread's rseq area is registered. A runtime that brings its
 * own rseq user may unregister glibc's: the kernel then leaves cpu_id at
 * -1 (RSEQ_CPU_ID_UNINITIALIZED) and mm_cid at 0, and restarts no
 * section, so such a thread skips the caches. */
/* [condition: rseq-off] */
static bool registered(void) {
  return *(volatile int32_t __seg_fs *)(hz_cpu_rseq_offset + 4) >= 0;
}

/* Up to `want` (1 or more) blocks of class `cls` from the top of this
 * CPU's cache into out[0..), the top one last; how many. The copies are
 * the section's scratch (a restart writes them again); the new top is its
 * one store that counts. */
static unsigned section_pop(size_t cls, void **out, uint64_t want) {
  uint64_t got;
  goto start;
aborted:
  hz_cpu_restarts++;
start:
  __asm__ goto(HZ_RSEQ_ARM(1, 2, 4) "1:\n\t" HZ_RSEQ_CACHE
               "jne %l[none]\n\t"
               "movl (%%rax,%[cls],4), %%ecx\n\t"
               "movl %%ecx, %%edx\n\t"
               "subl %k[want], %%edx\n\t"
               "jae 3f\n\t"
               "xorl %%edx, %%edx\n\t"
               "3:\n\t"
               "movq %%rcx, %[got]\n\t"
               "subq %%rdx, %[got]\n\t"
               "jz %l[none]\n\t"
               "leaq %c[slots](%%r11,%%rdx,8), %%r11\n\t"
               "xorl %%ecx, %%ecx\n\t"
               "5:\n\t"
               "movq (%%r11,%%rcx,8), %%r10\n\t"
               "movq %%r10, (%[out],%%rcx,8)\n\t"
               "addq $1, %%rcx\n\t"
               "cmpq %[got], %%rcx\n\t"
               "jb 5b\n\t"
               "movl %%edx, (%%rax,%[cls],4)\n\t"
               "2:\n\t" HZ_RSEQ_ABORT(4, aborted)
               : [got] "=&r"(got)
               : HZ_RSEQ_INPUTS(cls), [out] "r"(out), [want] "r"(want)
               : HZ_RSEQ_CLOBBERS
               : aborted, none);
  return (unsigned)got;
none:
  return 0;
}

/* blocks[0..n) (1 or more) of class `cls` onto this CPU's cache, as many
 * as it has room for, from the front; how many. The slots above the top
 * are the section's scratch; the new top is its one store that counts. */
static unsigned section_push(size_t cls, void *const *blocks, uint64_t n) {
  uint64_t got;
  goto start;
aborted:
  hz_cpu_restarts++;
start:
  __asm__ goto(HZ_RSEQ_ARM(1, 2, 4) "1:\n\t" HZ_RSEQ_CACHE
               "jne %l[none]\n\t"
               "movl (%%rax,%[cls],4), %%ecx\n\t"
               "movl %c[cap](%%rax,%[cls],4), %%edx\n\t"
               "subl %%ecx, %%edx\n\t"
               "cmpl %k[n], %%edx\n\t"
               "jbe 3f\n\t"
               "movl %k[n], %%edx\n\t"
               "3:\n\t"
               "testl %%edx, %%edx\n\t"
               "jz %l[none]\n\t"
               "movq %%rdx, %[got]\n\t"
               "leaq %c[slots](%%r11,%%rcx,8), %%r11\n\t"
               "addl %%edx, %%ecx\n\t"
               "xorl %%edx, %%edx\n\t"
               "5:\n\t"
               "movq (%[blocks],%%rdx,8), %%r10\n\t"
               "movq %%r10, (%%r11,%%rdx,8)\n\t"
               "addq $1, %%rdx\n\t"
               "cmpq %[got], %%rdx\n\t"
               "jb 5b\n\t"
               "movl %%ecx, (%%rax,%[cls],4)\n\t"
               "2:\n\t" HZ_RSEQ_ABORT(4, aborted)
               : [got] "=&r"(got)
               : HZ_RSEQ_INPUTS(cls), [blocks] "r"(blocks), [n] "r"(n),
                 [cap] "i"(HZ_CPU_CAP_OFFSET)
               : HZ_RSEQ_CLOBBERS
               : aborted, none);
  return (unsigned)got;
none:
  return 0;
}
#elif defined(__aarch64__)
/* The same two sections in AArch64 assembly. The thread's rseq area is at
 * the thread pointer (tpidr_el0) plus hz_cpu_rseq_offset; a section gets
 * its address in a register (rs) and arms itself with a 64-bit store of
 * its descriptor's address into the area's rseq_cs field (offset 8). */
#define HZ_RSEQ_ARM(start, end, abort)                                         \
  ".pushsection __rseq_cs, \"aw\"\n\t"                                         \
  ".balign 32\n\t"                                                             \
  "9:\n\t"                                                                     \
  ".long 0, 0\n\t"                                                             \
  ".quad " #start "f, (" #end "f - " #start "f), " #abort "f\n\t"              \
  ".popsection\n\t"                                                            \
  "adrp x9, 9b\n\t"                                                            \
  "add x9, x9, :lo12:9b\n\t"                                                   \
  "str x9, [%[rs], #8]\n\t"

/* The abort handler, preceded by the signature glibc registered on
 * AArch64 (RSEQ_SIG, 0xd428bc00, the encoding of `brk #0x45e0`, emitted
 * as an instruction so the word reads the same in code and data). */
#define HZ_RSEQ_ABORT(abort, label)                                            \
  ".pushsection __rseq_failure, \"ax\"\n\t"                                    \
  ".inst 0xd428bc00\n\t" #abort ":\n\t"                                        \
  "b %l[" #label "]\n\t"                                                       \
  ".popsection\n\t"

/* The CPU's cache into x9 (its id shifted by the stride, plus the base),
 * x10 at its class's row of slots; off to `none` if it is closed. The
 * load of `closed` is an acquire: the loads of the top and the slots that
 * follow must not see the cache from before the drain that opened it
 * again (x86-64 keeps loads in order by itself; AArch64 does not). */
#define HZ_RSEQ_CACHE                                                          \
  "ldr w9, [%[rs], %[id]]\n\t"                                                 \
  "lsl x9, x9, %[log2]\n\t"                                                    \
  "add x9, x9, %[caches]\n\t"                                                  \
  "lsl x10, %[cls], %[row]\n\t"                                                \
  "add x10, x10, x9\n\t"                                                       \
  "add x11, x9, %[closed]\n\t"                                                 \
  "ldar w11, [x11]\n\t"                                                        \
  "cbnz w11, %l[none]\n\t"

/* What every section reads, and what it changes. */
#define HZ_RSEQ_INPUTS(cls)                                                    \
  [rs] "r"(rseq_area()), [id] "r"(hz_cpu_id_offset),                           \
      [caches] "r"(hz_cpu_caches), [cls] "r"(cls), [row] "i"(HZ_CPU_ROW_LOG2), \
      [log2] "i"(HZ_CPU_CACHE_LOG2), [closed] "i"(HZ_CPU_CLOSED_OFFSET),       \
      [slots] "i"(HZ_CPU_SLOTS_OFFSET)
#define HZ_RSEQ_CLOBBERS "x9", "x10", "x11", "x12", "x13", "x14", "memory", "cc"

/* The calling thread's rseq area. */
static char *rseq_area(void) {
  return (char *)__builtin_thread_pointer() + hz_cpu_rseq_offset;
}

/* The calling thread's rseq area is registered (see the x86-64 one). */
static bool registered(void) {
  return *(volatile int32_t *)(rseq_area() + 4) >= 0;
}

/* Up to `want` (1 or more) blocks of class `cls` from the top of this
 * CPU's cache into out[0..), the top one last; how many. As on x86-64:
 * the copies are scratch, the new top is the store that counts. */
static unsigned section_pop(size_t cls, void **out, uint64_t want) {
  uint64_t got;
  goto start;
aborted:
  hz_cpu_restarts++;
start:
  __asm__ goto(HZ_RSEQ_ARM(1, 2, 4) "1:\n\t" HZ_RSEQ_CACHE
               "ldr w11, [x9, %[cls], lsl #2]\n\t"
               "subs w12, w11, %w[want]\n\t"
               "csel w12, wzr, w12, lo\n\t"
               "sub %[got], x11, x12\n\t"
               "cbz %[got], %l[none]\n\t"
               "add x10, x10, %[slots]\n\t"
               "add x10, x10, x12, lsl #3\n\t"
               "mov x13, #0\n\t"
               "5:\n\t"
               "ldr x14, [x10, x13, lsl #3]\n\t"
               "str x14, [%[out], x13, lsl #3]\n\t"
               "add x13, x13, #1\n\t"
               "cmp x13, %[got]\n\t"
               "b.lo 5b\n\t"
               "str w12, [x9, %[cls], lsl #2]\n\t"
               "2:\n\t" HZ_RSEQ_ABORT(4, aborted)
               : [got] "=&r"(got)
               : HZ_RSEQ_INPUTS(cls), [out] "r"(out), [want] "r"(want)
               : HZ_RSEQ_CLOBBERS
               : aborted, none);
  return (unsigned)got;
none:
  return 0;
}

/* blocks[0..n) (1 or more) of class `cls` onto this CPU's cache, as many
 * as it has room for, from the front; how many. The slots above the top
 * are scratch; the new top is the store that counts. */
static unsigned section_push(size_t cls, void *const *blocks, uint64_t n) {
  uint64_t got;
  goto start;
aborted:
  hz_cpu_restarts++;
start:
  __asm__ goto(HZ_RSEQ_ARM(1, 2, 4) "1:\n\t" HZ_RSEQ_CACHE
               "ldr w11, [x9, %[cls], lsl #2]\n\t"
               "add x12, x9, %[cap]\n\t"
               "ldr w12, [x12, %[cls], lsl #2]\n\t"
               "sub w12, w12, w11\n\t"
               "cmp w12, %w[n]\n\t"
               "csel w12, w12, %w[n], ls\n\t"
               "cbz w12, %l[none]\n\t"
               "mov %[got], x12\n\t"
               "add x10, x10, %[slots]\n\t"
               "add x10, x10, x11, lsl #3\n\t"
               "add w11, w11, w12\n\t"
               "mov x13, #0\n\t"
               "5:\n\t"
               "ldr x14, [%[blocks], x13, lsl #3]\n\t"
               "str x14, [x10, x13, lsl #3]\n\t"
               "add x13, x13, #1\n\t"
               "cmp x13, %[got]\n\t"
               "b.lo 5b\n\t"
               "str w11, [x9, %[cls], lsl #2]\n\t"
               "2:\n\t" HZ_RSEQ_ABORT(4, aborted)
               : [got] "=&r"(got)
               : HZ_RSEQ_INPUTS(cls), [blocks] "r"(blocks), [n] "r"(n),
                 [cap] "i"(HZ_CPU_CAP_OFFSET)
               : HZ_RSEQ_CLOBBERS
               : aborted, none);
  return (unsigned)got;
none:
  return 0;
}
#else
static bool registered(void) { return false; }
static unsigned section_pop(size_t cls, void **out, uint64_t want) {
  (void)cls, (void)out, (void)want;
  return 0;
}
static unsigned section_push(size_t cls, void *const *blocks, uint64_t n) {
  (void)cls, (void)blocks, (void)n;
  return 0;
}
#endif

/* This thread may use the caches: they are on, and it is registered. */
static bool caches_usable(void) { return hz_cpu_cache_on && registered(); }

/* ---------------------------------------------------------------------------
 * A batch on or off this CPU's cache
 * ------------------------------------------------------------------------- */
/* One drain at a time. */
static hz_lock_t drain_lock = HZ_LOCK_INIT(HZ_LOCK_ID_DRAIN);

static struct {
  uint64_t cache_gives, cache_takes, drains;
} counts;

#define COUNT(field) __atomic_add_fetch(&counts.field, 1, __ATOMIC_RELAXED)

unsigned hz_cpu_take(size_t cls, void **out, unsigned want) {
  HZ_ASSERT(hz_cpu_class(cls) && want >= 1 && want <= HZ_CPU_BATCH);
  if (!caches_usable()) return 0;
  unsigned n = section_pop(cls, out, want);
  if (n != 0) COUNT(cache_takes);
  return n;
}

unsigned hz_cpu_give(size_t cls, void *const *blocks, unsigned n) {
  HZ_ASSERT(hz_cpu_class(cls) && n >= 1 && n <= HZ_CPU_BATCH);
  unsigned took = caches_usable() ? section_push(cls, blocks, n) : 0;
  if (took != 0) COUNT(cache_gives);
  return took;
}

/* ---------------------------------------------------------------------------
 * Start-up
 * ------------------------------------------------------------------------- */
static long membarrier(int cmd, unsigned flags, int cpu) {
  return syscall(__NR_membarrier, cmd, flags, cpu);
}

/* rseq registered by glibc, a CPU id to index by, and membarrier to
 * abort sections on another CPU: the three things the caches need. */
static bool rseq_usable(void) {
#if defined(__x86_64__) || defined(__aarch64__)
  if (__rseq_size == 0) return false;
  hz_cpu_rseq_offset = __rseq_offset;
  unsigned long features = getauxval(AT_RSEQ_FEATURE_SIZE);
  hz_cpu_id_offset = features >= 28 ? 24 : 4; /* mm_cid, else cpu_id */
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0;
#else
  return false;
#endif
}

void hz_cpu_cache_init(bool allowed) {
#if defined(__SANITIZE_THREAD__)
  return; /* ThreadSanitizer cannot see what a section reads and writes */
#endif
  if (!allowed || HZ_VARIANT != 0 ||
      !hz_option_enabled(HZ_OPTION_CPU_CACHE) || !rseq_usable())
    return;
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  if (cpus < 1) return;
  size_t bytes = (size_t)cpus * sizeof(hz_cpu_cache_t);
  hz_cpu_caches = hz_os_map(HZ_ALIGN_UP(bytes, 4096));
  if (hz_cpu_caches == NULL) return;
  cache_count = cpus;
  for (int c = 1; c < HZ_CPU_CLASSES; c++)
    for (long i = 0; i < cpus; i++)
      hz_cpu_caches[i].cap[c] = class_stack((size_t)c);
  hz_cpu_cache_on = true;
}

/* ---------------------------------------------------------------------------
 * Draining
 * ------------------------------------------------------------------------- */
/* Send the blocks of a closed cache to their class heap. */
static void drain_one(hz_heap_t *heap, hz_cpu_cache_t *cache) {
  bool any = false;
  for (int c = 1; c < HZ_CPU_CLASSES; c++) {
    uint32_t top = __atomic_load_n(&cache->top[c], __ATOMIC_ACQUIRE);
    hz_heap_send_shared(heap, cache->slots[c], top);
    __atomic_store_n(&cache->top[c], 0, __ATOMIC_RELAXED);
    any |= top != 0;
  }
  if (any) COUNT(drains);
}

/* Close every cache, abort every section running anywhere (caches are
 * indexed by mm_cid, which is not a CPU number: all CPUs; after membarrier
 * returns, every section sees its cache closed and finds it empty or
 * full), send their blocks to their classes' heaps, open the caches
 * again. */
void hz_cpu_cache_drain(hz_heap_t *heap) {
  hz_lock(&drain_lock);
  if (hz_cpu_cache_on) {
    for (long i = 0; i < cache_count; i++)
      __atomic_store_n(&hz_cpu_caches[i].closed, 1, __ATOMIC_SEQ_CST);
    membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0);
    for (long i = 0; i < cache_count; i++)
      drain_one(heap, &hz_cpu_caches[i]);
    for (long i = 0; i < cache_count; i++)
      __atomic_store_n(&hz_cpu_caches[i].closed, 0, __ATOMIC_RELEASE);
  }
  hz_unlock(&drain_lock);
}

/* ---------------------------------------------------------------------------
 * fork and the stats
 * ------------------------------------------------------------------------- */
/* fork waits for a drain under way (the caches are open again after it). */
void hz_cpu_cache_fork_prepare(void) { hz_lock(&drain_lock); }

void hz_cpu_cache_fork_parent(void) { hz_unlock(&drain_lock); }

void hz_cpu_cache_fork_child(void) { hz_lock_reinit(&drain_lock); }

/* The blocks of class `cls` every CPU's cache holds: each top read once,
 * no lock taken. While threads run it is a snapshot (a batch on its way
 * between a cache and a bin is in neither); once they are joined nothing
 * moves and it is exact. */
static uint64_t class_cached(int cls) {
  uint64_t blocks = 0;
  for (long cpu = 0; cpu < cache_count; cpu++)
    blocks += HZ_SHARED_GET(hz_cpu_caches[cpu].top[cls]);
  return blocks;
}

/* Each class's blocks in the caches into cached[class] (0 for classes
 * above them); their sum. */
static uint64_t cached_by_class(uint64_t cached[HZ_CLASS_COUNT]) {
  uint64_t blocks = 0;
  memset(cached, 0, HZ_CLASS_COUNT * sizeof cached[0]);
  for (int c = 1; c < HZ_CPU_CLASSES; c++)
    blocks += cached[c] = class_cached(c);
  return blocks;
}

uint64_t hz_cpu_cache_blocks(void) {
  uint64_t cached[HZ_CLASS_COUNT];
  return cached_by_class(cached);
}

void hz_cpu_cache_thread_exit(void) {
  __atomic_add_fetch(&exited_restarts, hz_cpu_restarts, __ATOMIC_RELAXED);
  hz_cpu_restarts = 0;
}

void hz_cpu_cache_stats(hz_front_end_stats_t *out) {
  out->name = hz_cpu_cache_on ? "per-CPU caches (rseq) and depots" : "depots";
  out->cache_gives = HZ_SHARED_GET(counts.cache_gives);
  out->cache_takes = HZ_SHARED_GET(counts.cache_takes);
  out->drains = HZ_SHARED_GET(counts.drains);
  out->cached_blocks = cached_by_class(out->cached);
  out->restarts = HZ_SHARED_GET(exited_restarts) + hz_cpu_restarts;
}
