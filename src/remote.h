/* remote: how blocks freed by one thread get back to the heap that owns
 * them, without locks and without touching the owner's pages.
 *
 * The freeing thread collects such blocks in its stash: a few slots, each
 * a linked list of blocks bound for one inbox. A slot is published with a
 * single CAS when it is full (64 blocks or 256 KiB), when its slot is needed
 * for another destination, and when its heap flushes (malloc slow path, thread
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
/* A list is full when its blocks, each weighed as at least this many
 * bytes, reach HZ_STASH_MAX_BYTES: at most HZ_STASH_MAX_BLOCKS blocks, and
 * the byte cap for blocks of this size and more. One countdown per block
 * instead of a count and a sum. */
#define HZ_STASH_MIN_WEIGHT (HZ_STASH_MAX_BYTES / HZ_STASH_MAX_BLOCKS)

#define HZ_STASH_SKIP 8

typedef struct {
  hz_inbox_t *dest; /* NULL: slot empty */
  hz_block_t *first;
  hz_block_t *last;
  uint32_t count;
  int32_t room;       /* weight left before the list is full */
  uint64_t opened_ns; /* when the list got its first block; 0: not timed */
  /* The last blocks stashed, by count; NULL where the list has none yet */
  hz_block_t *recent[HZ_STASH_SKIP];
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

/* Heaps are at least 64-byte aligned: hash the bits above that. */
HZ_INLINE unsigned hz_remote_slot_index(const hz_inbox_t *dest) {
  uint32_t h = (uint32_t)((uintptr_t)dest >> 6) * 0x9E3779B1u;
  return h >> (32 - 3);
}
_Static_assert(HZ_STASH_SLOTS == 8, "hz_remote_slot_index yields 3 bits");

/* Start a list for `dest` in slot `index` with `block`, publishing what the
 * slot held for another destination; returns the lists published. */
unsigned hz_remote_stash_open(hz_stash_t *stash, unsigned index,
                              hz_inbox_t *dest, hz_block_t *block, size_t size);
/* Publish the list of slot `index`; returns the lists published (0: the
 * slot held none). */
unsigned hz_remote_publish(hz_stash_t *stash, unsigned index);

/* Stash a block of `size` bytes for `dest`. Returns the number of lists
 * this published (0, 1 or 2). Inline: adding to an open list is a dozen
 * instructions on the remote free path. */
HZ_INLINE unsigned hz_remote_stash(hz_stash_t *stash, hz_inbox_t *dest,
                                   hz_block_t *block, size_t size) {
  unsigned index = hz_remote_slot_index(dest);
  hz_stash_slot_t *slot = &stash->slots[index];
  if (HZ_UNLIKELY(slot->dest != dest))
    return hz_remote_stash_open(stash, index, dest, block, size);
  hz_block_t **recent = &slot->recent[slot->count % HZ_STASH_SKIP];
  hz_block_t **skip = hz_remote_skip_slot(block, size);
  if (skip != NULL) *skip = *recent;
  *recent = block;
  hz_block_set_next(block, slot->first);
  slot->first = block;
  slot->count++;
  slot->room -=
      (int32_t)(size > HZ_STASH_MIN_WEIGHT ? size : HZ_STASH_MIN_WEIGHT);
  if (HZ_UNLIKELY(slot->room <= 0)) return hz_remote_publish(stash, index);
  return 0;
}

/* Publish every slot; returns the number of lists published. */
unsigned hz_remote_flush(hz_stash_t *stash);

HZ_INLINE bool hz_remote_stash_empty(const hz_stash_t *stash) {
  return stash->held == 0;
}

#endif
