/* Build-wide constants and helper macros shared by every box.
 *
 * Geometry: memory comes in 4 MiB segments aligned to their size, cut into
 * 64 KiB slices; a page is a run of slices sized by its blocks (segment.h;
 * a page holds at least 8 blocks, a segment's first page at least 7).
 * Pointer -> segment is a mask, segment -> slice a shift. */
#ifndef HZ_CONFIG_H
#define HZ_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define HZ_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HZ_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HZ_INLINE      static inline __attribute__((always_inline))
#define HZ_NOINLINE    __attribute__((noinline))
#define HZ_EXPORT      __attribute__((visibility("default")))
/* The entries every program calls millions of times (malloc, free and
 * their hz_ forms) and the leaves their fast paths jump to sit at fixed
 * places: malloc starts a 4 KiB page of code, and the others follow it in
 * the order of their rank, each at the start of a 64-byte line. The linker
 * sorts the .text.sorted sections by name, so nothing written elsewhere
 * in the library moves them, not even within a page: a review commit that
 * moved malloc and free by 0x60 bytes and changed nothing else took a
 * single-threaded loop (mimalloc-bench's glibc-simple) from 1.27 to 1.80 s,
 * the program's own loop slowing as much as malloc (docs/benchmarks.md,
 * "Code placement"). Cold paths say so (__attribute__((cold))) and go to
 * .text.unlikely, away from these lines. */
#define HZ_HOT(rank)                                                           \
  __attribute__((hot, aligned(64), section(".text.sorted.hakozuna." #rank)))
#define HZ_HOT_PAGE __attribute__((aligned(4096)))
/* On the declaration of a global a fast path reads: one load relative to
 * the instruction pointer, not a load of its address from the GOT first
 * (-fvisibility=hidden reaches only definitions). */
#define HZ_HIDDEN __attribute__((visibility("hidden")))
#define HZ_TLS    __thread __attribute__((tls_model("initial-exec")))
/* Ask for the cache line at `p` to be fetched ready for writing, ahead of
 * a store. On x86-64 `prefetchw`, which GCC emits for __builtin_prefetch
 * only with -mprfchw; every x86-64 decodes it (the oldest as a no-op).
 * Elsewhere the builtin's own, on AArch64 `prfm pstl1keep`. A hint: it
 * never faults. */
#if defined(__x86_64__)
#define HZ_PREFETCH_WRITE(p)                                                   \
  __asm__ volatile("prefetchw %0" ::"m"(*(const char *)(p)))
#else
#define HZ_PREFETCH_WRITE(p) __builtin_prefetch((p), 1, 3)
#endif

/* A word one thread writes while any thread may read it (statistics, a
 * page's count of used blocks): relaxed atomic accesses, plain moves on
 * x86-64 and AArch64, which tell the compiler and ThreadSanitizer that the
 * sharing is meant. A reader sees each word whole, the set of them as a
 * snapshot that may be a moment apart. */
#define HZ_SHARED_GET(word) __atomic_load_n(&(word), __ATOMIC_RELAXED)
#define HZ_SHARED_SET(word, value)                                             \
  __atomic_store_n(&(word), (value), __ATOMIC_RELAXED)
#define HZ_SHARED_ADD(word, n) HZ_SHARED_SET(word, (word) + (n))

#define HZ_SEGMENT_SHIFT 22
#define HZ_SEGMENT_SIZE  ((size_t)1 << HZ_SEGMENT_SHIFT)
#define HZ_SEGMENT_MASK  (HZ_SEGMENT_SIZE - 1)

/* The range of address space aligned mappings (large blocks, segments
 * mapped outside the arena) are placed in when the kernel allows (os box:
 * asked for there first, in order). The segment map has one byte per
 * segment up to its end, so "is this ours" is one load there; pointers
 * above take a slower lookup. */
#define HZ_HINT_BASE ((uintptr_t)2 << 40)
#define HZ_HINT_SIZE ((uintptr_t)2 << 40)
/* The bits of a user address the kernel hands out unasked: 47 on x86-64
 * (four-level page tables; a five-level kernel maps higher only where a
 * hint asks), 48 on AArch64 (a 48-bit address space, mmap's addresses just
 * below 2^48; a 52-bit kernel maps higher only where asked). */
#if defined(__aarch64__)
#define HZ_ADDRESS_BITS 48
#else
#define HZ_ADDRESS_BITS 47
#endif

/* The largest block of each page kind but the biggest (segment.h). */
#define HZ_SMALL_BLOCK_MAX  ((size_t)8 << 10)
#define HZ_MEDIUM_BLOCK_MAX ((size_t)16 << 10)
#define HZ_WIDE_BLOCK_MAX   ((size_t)64 << 10)

/* Largest thread-cached block; anything bigger goes to the large box. */
#define HZ_SMALL_MAX ((size_t)256 << 10)
/* One malloc in this many goes to the guarded sample (guard box) unless
 * HZ_GUARD_SAMPLE says otherwise. */
#define HZ_GUARD_SAMPLE_DEFAULT 100000
/* Every block is aligned to at least this. */
#define HZ_MIN_ALIGN 16
/* Requests above this fail with ENOMEM (as glibc does). */
#define HZ_REQUEST_MAX ((size_t)PTRDIFF_MAX)

#define HZ_ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((uintptr_t)(a)-1))

/* Build variant, one source for three libraries: 0 release, 1 secure
 * (libhakozuna-secure.so), 2 debug (libhakozuna-debug.so). Each level keeps
 * the checks of the one below. Code tests these as plain constants, so the
 * checks a variant leaves out are compiled away, not hidden behind #if. */
/* Debug variant built with valgrind's headers: memcheck annotations
 * (tool.h). */
#ifndef HZ_VALGRIND
#define HZ_VALGRIND 0
#endif

#ifndef HZ_VARIANT
#define HZ_VARIANT 0
#endif
#define HZ_SECURE (HZ_VARIANT >= 1) /* fail-fast checks and hardening */
#define HZ_CANARY (HZ_VARIANT >= 2) /* fill bytes and a canary per block */

#ifdef HZ_DEBUG
void hz_debug_fail(const char *expr, const char *file, int line);
#define HZ_ASSERT(x) ((x) ? (void)0 : hz_debug_fail(#x, __FILE__, __LINE__))
#else
#define HZ_ASSERT(x) ((void)0)
#endif

#endif
