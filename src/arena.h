/* arena: the address space the small-block segments are cut from. One
 * large reservation, inaccessible until used, made at the first request:
 * segments are committed from its start in address order and never
 * unmapped, so "is this pointer in a segment?" is a subtract and a
 * compare against the span committed so far, and the header of any
 * segment inside it can always be read (a segment given back reads as
 * zeros: no page in use).
 *
 * Under an address-space limit (ulimit -v) the reservation is a fraction
 * of the limit, or smaller when the kernel refuses it, or none; the
 * segment box then maps the segments it needs one by one and finds them
 * through its map. Every call but hz_arena_holds is made under the
 * segment lock. */
#ifndef HZ_ARENA_H
#define HZ_ARENA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Where the reservation starts (set once, before the span first grows)
 * and how much of it is committed (only grows). One line, one address. */
typedef struct {
  _Atomic uintptr_t start;
  _Atomic size_t span;
} hz_arena_bounds_t;
extern hz_arena_bounds_t hz_arena;

/* True when p lies in a committed segment of the reservation (false for
 * NULL). p - 1, as for the segment map: a block ending a segment exactly
 * belongs to it. */
HZ_INLINE bool hz_arena_holds(const void *p) {
  uintptr_t start = atomic_load_explicit(&hz_arena.start, memory_order_relaxed);
  size_t span = atomic_load_explicit(&hz_arena.span, memory_order_relaxed);
  return (uintptr_t)p - 1 - start < span;
}

/* A 4 MiB segment of the reservation, readable and writable, reading as
 * zeros; NULL when the reservation is full or was refused. */
void *hz_arena_take(void);
/* A segment back (all its pages free): its memory goes back to the
 * kernel, and it is handed out again before any new one. */
void hz_arena_give(void *seg);
/* The huge-page advice a fresh range of segments starts with (the
 * reservation, and segments the segment box maps on their own). */
void hz_arena_advise(void *start, size_t size);
/* Bytes reserved, and bytes of segments handed out now. */
size_t hz_arena_reserved(void);
size_t hz_arena_in_use(void);

#endif
