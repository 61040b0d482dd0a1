/* remote: how blocks freed by one thread get back to the heap that owns
 * them, without locks and without touching the owner's pages.
 *
 * The freeing thread collects such blocks in its stash: a few slots, each
 * a linked list of blocks bound for one inbox. A slot is published with a
 * single CAS when it is full (count or bytes), when its slot is needed for
 * another destination, and when its heap flushes (malloc slow path, thread
 * exit). The owner takes its whole inbox with one atomic exchange (no ABA:
 * nothing is ever popped singly).
 *
 * Walking a list of blocks the freeing thread just wrote is a chain of
 * cache misses, so each stashed block also records the block
 * HZ_STASH_SKIP places further down its list (hz_remote_skip: the second
 * word, the third in the secure variants): the owner prefetches that far ahead
 * while it drains. A non-NULL inbox head is the pending flag: the owner polls
 * one word and never scans. */
#ifndef HZ_REMOTE_H
#define HZ_REMOTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "page.h"

typedef struct {
  _Atomic(hz_block_t *) head;
} hz_inbox_t;

#define HZ_STASH_SLOTS      8
#define HZ_STASH_MAX_BLOCKS 64
#define HZ_STASH_MAX_BYTES  ((uint32_t)256 << 10)

#define HZ_STASH_SKIP 8

typedef struct {
  hz_inbox_t *dest; /* NULL: slot empty */
  hz_block_t *first;
  hz_block_t *last;
  uint32_t count;
  uint32_t bytes;
  uint64_t opened_ns; /* when the list got its first block; 0: not timed */
  hz_block_t *recent[HZ_STASH_SKIP]; /* the last blocks stashed, by count */
} hz_stash_slot_t;

typedef struct {
  hz_stash_slot_t slots[HZ_STASH_SLOTS];
  uint32_t held;        /* bit i set: slot i holds blocks */
  uint64_t cas_retries; /* failed CAS of its publications, for the stats */
  uint64_t lists;       /* lists opened */
  uint64_t wait_ns;     /* summed over timed lists: first block to publish */
  uint64_t timed;       /* lists timed: one in HZ_STASH_TIME_EVERY */
} hz_stash_t;

/* A clock read costs as much as stashing a few blocks: one list in this
 * many is timed, the first included. */
#define HZ_STASH_TIME_EVERY 16

/* Append the list first..last (linked by next) to the inbox: one CAS, and
 * one more for every other push that got in between. Returns the number of
 * CAS that failed (the stats report counts them). */
unsigned hz_remote_push(hz_inbox_t *inbox, hz_block_t *first, hz_block_t *last);
/* Push one block of `size` bytes (no stash); returns the failed CAS. */
unsigned hz_remote_push_one(hz_inbox_t *inbox, hz_block_t *block, size_t size);
/* Take everything; NULL when empty. */
hz_block_t *hz_remote_take_all(hz_inbox_t *inbox);

HZ_INLINE bool hz_remote_pending(hz_inbox_t *inbox) {
  return atomic_load_explicit(&inbox->head, memory_order_relaxed) != NULL;
}

/* Where a block of `size` bytes in a published list keeps its skip
 * pointer: the second word, or in the secure variants, whose second word
 * is the free mark, the third (NULL: 16-byte blocks have none there). */
HZ_INLINE hz_block_t **hz_remote_skip_slot(const hz_block_t *block,
                                           size_t size) {
  if (!HZ_SECURE) return &((hz_block_t **)block)[1];
  return size >= 32 ? &((hz_block_t **)block)[2] : NULL;
}

/* The block HZ_STASH_SKIP places after `block` (of `size` bytes) in a
 * published list (NULL near a list's end): worth a prefetch while
 * draining. */
HZ_INLINE hz_block_t *hz_remote_skip(const hz_block_t *block, size_t size) {
  hz_block_t **slot = hz_remote_skip_slot(block, size);
  return slot != NULL ? *slot : NULL;
}

/* Stash a block of `size` bytes for `dest`. Returns the number of lists
 * this published (0, 1 or 2). */
unsigned hz_remote_stash(hz_stash_t *stash, hz_inbox_t *dest, hz_block_t *block,
                         size_t size);
/* Publish every slot; returns the number of lists published. */
unsigned hz_remote_flush(hz_stash_t *stash);

HZ_INLINE bool hz_remote_stash_empty(const hz_stash_t *stash) {
  return stash->held == 0;
}

#endif
