/* remote: how blocks freed by one thread get back to the heap that owns
 * them, without locks and without touching the owner's pages.
 *
 * The freeing thread collects such blocks in its stash, in runs: a run
 * holds blocks of one page, linked the way that page's own free list links
 * them. The stash keeps HZ_STASH_RUNS open runs, one per slot chosen by a
 * hash of the page. A run closes when it holds HZ_RUN_MAX blocks or
 * HZ_STASH_MAX_BYTES, when its slot is wanted by another page, and when
 * the stash is flushed; closing
 * writes the run's descriptor (its last block and its length, encoded)
 * into its first block, and the run joins the list of its destination
 * inbox, one of HZ_STASH_SLOTS lists chosen by a hash of the inbox. A list
 * is published with a single CAS when it is full (count or bytes), when
 * its slot is needed for another destination, and when its heap flushes
 * (malloc slow path, thread exit).
 *
 * The owner takes its whole inbox with one atomic exchange (no ABA:
 * nothing is ever popped singly) and puts each run back on its page in one
 * step: the descriptor names the run's last block, whose link leads to the
 * next run. The owner touches two blocks per run, not every block; the
 * blocks inside a run are checked when the page's free list is walked. A
 * non-NULL inbox head is the pending flag: the owner polls one word and
 * never scans. */
#ifndef HZ_REMOTE_H
#define HZ_REMOTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "page.h"

typedef struct {
  _Atomic(hz_block_t *) head;
} hz_inbox_t;

#define HZ_STASH_RUNS       16
#define HZ_RUN_MAX          64
#define HZ_STASH_SLOTS      8
#define HZ_STASH_MAX_BLOCKS 64
#define HZ_STASH_MAX_BYTES  ((uint32_t)256 << 10)

/* An open run: blocks of one page, newest first. */
typedef struct {
  const hz_page_t *page; /* NULL: slot empty; a key, never read */
  hz_inbox_t *dest;
  hz_block_t *head, *tail;
  uint32_t count;
  uint32_t size; /* block size */
} hz_run_t;

/* Closed runs bound for one inbox. */
typedef struct {
  hz_inbox_t *dest; /* NULL: slot empty */
  hz_block_t *first;
  hz_block_t *last;
  uint32_t count;
  uint32_t bytes;
  uint64_t opened_ns; /* when the list got its first run */
} hz_stash_slot_t;

typedef struct {
  hz_run_t runs[HZ_STASH_RUNS];
  hz_stash_slot_t slots[HZ_STASH_SLOTS];
  uint32_t runs_held;   /* bit i set: run slot i is open */
  uint32_t slots_held;  /* bit i set: slot i holds runs */
  uint64_t cas_retries; /* failed CAS of its publications, for the stats */
  uint64_t wait_ns;     /* summed over lists: first run to publish */
} hz_stash_t;

/* A run as the owner reads it back: its last block and its length. */
typedef struct {
  hz_block_t *tail;
  uint32_t count;
} hz_run_info_t;

/* The slot of a destination (heaps, so inboxes, are 64-byte aligned: the
 * bits above that are hashed) and of a page's run (page descriptors are
 * 64-byte aligned too). */
HZ_INLINE unsigned hz_remote_slot_index(const hz_inbox_t *dest) {
  uint32_t h = (uint32_t)((uintptr_t)dest >> 6) * 0x9E3779B1u;
  return h >> (32 - 3);
}
_Static_assert(HZ_STASH_SLOTS == 8, "hz_remote_slot_index yields 3 bits");

HZ_INLINE unsigned hz_remote_run_index(const hz_page_t *page) {
  uint32_t h = (uint32_t)((uintptr_t)page >> 6) * 0x9E3779B1u;
  return h >> (32 - 4);
}
_Static_assert(HZ_STASH_RUNS == 16, "hz_remote_run_index yields 4 bits");

/* Append the list first..last (linked by next) to the inbox: one CAS, and
 * one more for every other push that got in between. Returns the number of
 * CAS that failed (the stats report counts them). */
unsigned hz_remote_push(hz_inbox_t *inbox, hz_block_t *first, hz_block_t *last);
/* Push one block of `size` bytes as a run of its own (no stash); returns
 * the failed CAS. */
unsigned hz_remote_push_one(hz_inbox_t *inbox, hz_block_t *block, size_t size);
/* Take everything; NULL when empty. */
hz_block_t *hz_remote_take_all(hz_inbox_t *inbox);

HZ_INLINE bool hz_remote_pending(hz_inbox_t *inbox) {
  return atomic_load_explicit(&inbox->head, memory_order_relaxed) != NULL;
}

/* Where a block of `size` bytes that heads a run keeps the run's
 * descriptor: the second word, or in the secure variants, whose second
 * word is the free mark, the third (NULL: 16-byte blocks have none there,
 * and travel in runs of one). */
HZ_INLINE uintptr_t *hz_remote_descriptor_slot(hz_block_t *head,
                                               size_t size) {
  if (!HZ_SECURE) return &((uintptr_t *)head)[1];
  return size >= 32 ? &((uintptr_t *)head)[2] : NULL;
}

/* The run that starts at `head` (a block of `size` bytes taken from an
 * inbox): its last block and length. The caller checks both against the
 * page: a spoilt descriptor decodes to nonsense. The last block's link
 * (hz_block_next) is the next run's first block, or NULL. */
hz_run_info_t hz_remote_run(hz_block_t *head, size_t size);

/* Stash a block of `size` bytes of `page` (a key only, never read) for
 * `dest`. Returns the number of lists this published (0, 1 or 2). */
unsigned hz_remote_stash(hz_stash_t *stash, const hz_page_t *page,
                         hz_inbox_t *dest, hz_block_t *block, size_t size);
/* Close every run and publish every list; returns the lists published. */
unsigned hz_remote_flush(hz_stash_t *stash);

HZ_INLINE bool hz_remote_stash_empty(const hz_stash_t *stash) {
  return (stash->runs_held | stash->slots_held) == 0;
}

#endif
