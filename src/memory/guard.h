/* guard: the guarded sample (HZ_GUARD_SAMPLE), in every variant. About one
 * small allocation in N, up to HZ_GUARD_MAX bytes, is placed alone in a
 * slot of a fixed pool (HZ_GUARD_SLOTS slots, each between inaccessible
 * pages): its end against the upper guard page (an overflow faults at
 * once) or its start against the lower one (an underflow does), chosen by
 * HZ_GUARD_MODE; the bytes of its pages around it hold a canary checked
 * when it is freed. A freed slot's pages become inaccessible and the slot
 * goes last in line, so a later read or write of the block faults.
 *
 * The fault is caught by a SIGSEGV handler (installed at the first guarded
 * block, chaining to the program's handler, or to the default, for faults
 * that are not ours) and reported on stderr: the kind, the address and
 * offset, the block's size, where it was accessed, allocated and (for a use
 * after free) freed. Then the program dies as it would have, or with
 * HZ_GUARD_RECOVER=1 the page is opened and it goes on.
 *
 * The heap box decides when: the bins' countdown (heap.h) that the
 * profiler draws its samples with draws the guard's turns when the
 * profiler is off. Stacks come from the C library's backtrace(). */
#ifndef HZ_GUARD_H
#define HZ_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "stats.h"

extern bool hz_guard_active;
/* The pool's addresses (0 and 0 while off). */
extern uintptr_t hz_guard_base;
extern size_t hz_guard_span;

/* At process start, after the options and the profiler: reserve the pool
 * when HZ_GUARD_SAMPLE is not 0 and the profiler is off. */
void hz_guard_start(void);

/* Mallocs of a class to let pass before the guard's next turn (a
 * geometric gap of mean HZ_GUARD_SAMPLE; 1 means the very next). */
uint64_t hz_guard_blocks_to_skip(void);
/* The largest request the guard takes (HZ_GUARD_MAX). */
size_t hz_guard_max_size(void);

/* A guarded block of `size` bytes, or NULL (too large, the pool is full,
 * or this thread is inside the guard). */
void *hz_guard_malloc(size_t size);

/* The live guarded block `block` is handed out as `start` (inside it, for
 * an aligned request) for `size` bytes: the canary moves around them. */
void hz_guard_narrow(void *block, void *start, size_t size);

/* p lies in the pool: a guarded block or a pointer to report. */
HZ_INLINE bool hz_guard_holds(const void *p) {
  return (uintptr_t)p - hz_guard_base < hz_guard_span;
}
/* Free p (hz_guard_holds): its canary checked, its pages closed. */
void hz_guard_free(void *p);
/* The size asked for of the live guarded block p starts; 0 (reported as
 * `what`) when p is none. */
size_t hz_guard_size(const void *p, const char *what);

void hz_guard_stats(hz_guard_stats_t *out);

/* fork: the pool's lock. */
void hz_guard_fork_prepare(void);
void hz_guard_fork_parent(void);
void hz_guard_fork_child(void);

#endif
