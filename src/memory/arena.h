/* arena: the address space the small-block segments are cut from. One
 * large reservation, its size a power of two and its start aligned to it,
 * readable (as zeros) but not writable until used, made at the first
 * request: segments are committed from its start in address order and
 * never unmapped, so "is this pointer in the arena?" is a mask and a
 * compare, and the header of any segment inside it can always be read (a
 * segment never committed or given back reads as zeros: no page in
 * use).
 *
 * Under an address-space limit (ulimit -v) the reservation is a fraction
 * of the limit, or smaller when the kernel refuses it, or none; the
 * segment box then maps the segments it needs one by one and finds them
 * through its map. Every call but hz_arena_holds is made under the
 * segment lock. */
#ifndef HZ_ARENA_H
#define HZ_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Where the reservation starts, and the mask that rounds an address in
 * it down to that start. Written once, under the segment lock, before the
 * first segment is handed out (start is 1 and mask 0 until then, so no
 * address is held): a thread holds a pointer into the arena only after
 * that, so plain loads read them, and the free fast path folds them into
 * its mask and compare. */
typedef struct {
  uintptr_t start, mask;
} hz_arena_bounds_t;
extern HZ_HIDDEN hz_arena_bounds_t hz_arena;

/* True when p lies in the reservation (false for NULL): its segment's
 * header can be read, and names no page where nothing was committed.
 * p - 1, as for the segment map: a block ending a segment exactly belongs
 * to it. */
HZ_INLINE bool hz_arena_holds(const void *p) {
  return (((uintptr_t)p - 1) & hz_arena.mask) == hz_arena.start;
}

/* A 4 MiB segment of the reservation, readable and writable, reading as
 * zeros; NULL when the reservation is full or was refused. */
void *hz_arena_take(void);
/* A segment back (all its pages free), its memory given back to the
 * kernel already (hz_arena_discard, outside the caller's lock): it is
 * handed out again before any new one. */
void hz_arena_give(void *seg);
/* Give a segment's memory back before hz_arena_give (no lock needed: the
 * segment is nobody's). */
void hz_arena_discard(void *seg);
/* The huge-page advice a fresh range of segments starts with (the
 * reservation, and segments the segment box maps on their own). */
void hz_arena_advise(void *start, size_t size);
/* Lift that advice from a range about to get a huge page; hz_arena_advise
 * puts it back. */
void hz_arena_advise_huge(void *start, size_t size);
/* Bytes reserved, and bytes of segments handed out now. */
size_t hz_arena_reserved(void);
size_t hz_arena_in_use(void);

#endif
