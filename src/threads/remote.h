/* remote: how blocks freed by one thread get back to the heap that owns
 * them, without locks and without touching the owner's pages.
 *
 * The freeing thread collects such blocks in its stash: a few slots, each
 * a list of blocks bound for one inbox. A slot is published with a single
 * CAS when it is full (64 blocks or 256 KiB), when its slot is needed for
 * another destination, and when its heap flushes (malloc slow path, thread
 * exit). The owner takes its whole inbox with one atomic exchange (no ABA:
 * nothing is ever popped singly).
 *
 * A list is a chain of headers. A header is a freed block whose first
 * word links the next header (encoded, with the number of names the
 * header holds in its low four bits) and whose following words hold up to
 * 15 names, as many as fit (a 64-byte block holds 7). A name is a freed
 * block, or a run: blocks freed one after the other that lie one after
 * the other on one page (a stream of frees in address order, as a
 * consumer frees what a producer allocated). A run's name is its first
 * block with the low bit set, and that block's first word holds its last
 * block, encoded like a link: the freeing thread writes one word per run,
 * the owner sets a run's bits a word of the bitmap at a time, and no other
 * block of the run is written or read here. A block that extends the open
 * run costs the freeing thread one compare and one store (`run_next`);
 * the run's slot counts it later (hz_remote_settle). A list reads
 * newest first: a header's names from the last, then the header, then the
 * next header. A non-NULL inbox head is the pending flag: the owner polls
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

/* What a block of `size` bytes takes of a list's room. */
HZ_INLINE int32_t hz_remote_weight(size_t size) {
  return (int32_t)(size > HZ_STASH_MIN_WEIGHT ? size : HZ_STASH_MIN_WEIGHT);
}

/* One line: what a free bound for the slot's destination reads. */
typedef struct {
  hz_inbox_t *dest;  /* NULL: slot empty */
  hz_block_t *first; /* the newest header, still naming blocks */
  hz_block_t *older; /* the header after `first` in the list */
  hz_block_t *last;  /* the oldest header: its link goes to the inbox */
  /* The last name of `first` (its word named - 1): a block, run_last, or,
   * when run_first is not NULL, a run from run_first to run_last. NULL:
   * `first` holds no name yet. */
  hz_block_t *run_first;
  hz_block_t *run_last;
  uint16_t named;      /* names `first` holds so far */
  uint16_t can_name;   /* names `first` has room for */
  uint16_t last_named; /* names `last` holds, once `first` is another */
  int32_t room;        /* weight left before the list is full */
  uint32_t blocks;     /* blocks in the list */
} hz_stash_slot_t;

_Static_assert(sizeof(hz_stash_slot_t) == 64, "a stash slot is one line");

typedef struct {
  hz_stash_slot_t slots[HZ_STASH_SLOTS];
  /* The block that extends slot run_slot's run; 0: none. Written by
   * whoever holds the heap (its thread, a collector flushing the stash),
   * read by its thread's free before it enters (hz_heap_extends_run).
   * While it is not 0, the slot's run ends at the block before it: the
   * blocks that extended the run since the slot last counted
   * (hz_remote_settle) are in its run_last, blocks and room only once
   * counted. */
  uintptr_t run_next;
  /* The first block at which the open run stops extending on the fast
   * path: its page's last block, or the one that fills its list. */
  uintptr_t run_stop;
  uintptr_t run_limit;       /* the last block of that run's page */
  uintptr_t run_owner;       /* that page's owner word, no flag set */
  const hz_page_t *run_page; /* that page: its frees are counted per run */
  uint32_t run_slot;
  uint32_t run_size;  /* its blocks' size */
  int32_t run_weight; /* what each of its blocks takes of the list's room */
  uint64_t opened_ns[HZ_STASH_SLOTS]; /* a list's first block; 0: untimed */
  uint32_t held;                      /* bit i set: slot i holds blocks */
  uint64_t cas_retries; /* failed CAS of its publications, for the stats */
  uint64_t published;   /* blocks published, for the stats */
  uint64_t lists;       /* lists opened */
  uint64_t wait_ns;     /* summed over timed lists: first block to publish */
  uint64_t timed;       /* lists timed: one in HZ_STASH_TIME_EVERY */
} hz_stash_t;

/* A clock read costs as much as stashing a few blocks: one list in this
 * many is timed, the first included. */
#define HZ_STASH_TIME_EVERY 16

/* Most blocks a header names. */
#define HZ_REMOTE_NAMES_MAX 15

/* A header's named blocks start after its link and its free mark
 * (check.h), which stays for the whole way home. */
#define HZ_REMOTE_NAMES_AT 2

/* How many blocks a header of `size` bytes can name. */
HZ_INLINE uint32_t hz_remote_can_name(size_t size) {
  size_t words = size / sizeof(void *) - HZ_REMOTE_NAMES_AT;
  return (uint32_t)(words < HZ_REMOTE_NAMES_MAX ? words : HZ_REMOTE_NAMES_MAX);
}

/* Name `block` in word i of a header's names. Names are encoded like links
 * (check.h), each with its own word's key: a use after free that writes the
 * address of a live block there does not get it handed out, it decodes to
 * an address the owner's check refuses. */
HZ_INLINE void hz_remote_name_set(hz_block_t *header, uint32_t i,
                                  hz_block_t *block) {
  void **word = (void **)header + HZ_REMOTE_NAMES_AT + i;
  *word = hz_check_encode(word, block);
}

/* The block named in word i of a header's names (unchecked). */
HZ_INLINE hz_block_t *hz_remote_name(const hz_block_t *header, uint32_t i) {
  void *const *word = (void *const *)header + HZ_REMOTE_NAMES_AT + i;
  return hz_check_decode(word, *word);
}

/* A name with this bit set names a run: the block is its first, and its
 * first word holds the run's last block (hz_block_next). */
#define HZ_REMOTE_RUN ((uintptr_t)1)

HZ_INLINE bool hz_remote_is_run(const hz_block_t *name) {
  return ((uintptr_t)name & HZ_REMOTE_RUN) != 0;
}

HZ_INLINE hz_block_t *hz_remote_run_first(const hz_block_t *name) {
  return (hz_block_t *)((uintptr_t)name & ~HZ_REMOTE_RUN);
}

/* Write a header's link: the next header and the number it names. */
HZ_INLINE void hz_remote_set_link(hz_block_t *header, hz_block_t *next,
                                  uint32_t named) {
  hz_block_set_next(header, (hz_block_t *)((uintptr_t)next | named));
}

/* Read a header's link: the next header, and in *named how many blocks it
 * names. Neither is checked: the owner checks both before it trusts them. */
HZ_INLINE hz_block_t *hz_remote_link(const hz_block_t *header,
                                     uint32_t *named) {
  uintptr_t word = (uintptr_t)hz_block_next(header);
  *named = (uint32_t)(word & HZ_REMOTE_NAMES_MAX);
  return (hz_block_t *)(word & ~(uintptr_t)HZ_REMOTE_NAMES_MAX);
}
_Static_assert(HZ_REMOTE_NAMES_MAX == 15, "blocks are 16-byte aligned");

/* Append the list of headers first..last, `last` naming `last_named`
 * blocks, to the inbox: one CAS, and one more for every other push that
 * got in between. Returns the number of CAS that failed (the stats report
 * counts them). */
unsigned hz_remote_push(hz_inbox_t *inbox, hz_block_t *first, hz_block_t *last,
                        uint32_t last_named);
/* Push one block alone (no stash); returns the failed CAS. */
unsigned hz_remote_push_one(hz_inbox_t *inbox, hz_block_t *block);
/* Take everything; NULL when empty. */
hz_block_t *hz_remote_take_all(hz_inbox_t *inbox);

HZ_INLINE bool hz_remote_pending(const hz_inbox_t *inbox) {
  return atomic_load_explicit(&inbox->head, memory_order_relaxed) != NULL;
}

/* Heaps are at least 64-byte aligned: hash the bits above that. */
HZ_INLINE unsigned hz_remote_slot_index(const hz_inbox_t *dest) {
  uint32_t h = (uint32_t)((uintptr_t)dest >> 6) * 0x9E3779B1u;
  return h >> (32 - 3);
}
_Static_assert(HZ_STASH_SLOTS == 8, "hz_remote_slot_index yields 3 bits");

/* Start a list for `dest` in slot `index` with `block` (of `page`),
 * publishing what the slot held for another destination; returns the lists
 * published. */
unsigned hz_remote_stash_open(hz_stash_t *stash, unsigned index,
                              hz_inbox_t *dest, hz_block_t *block,
                              const hz_page_t *page);
/* Publish the list of slot `index`; returns the lists published (0: the
 * slot held none). */
unsigned hz_remote_publish(hz_stash_t *stash, unsigned index);

/* The slot's open run ends: a run of more than one block gets its name
 * (the run bit) and its last block written into its first. */
HZ_INLINE void hz_remote_run_close(hz_stash_slot_t *slot) {
  if (slot->run_first != NULL) {
    hz_block_set_next(slot->run_first, slot->run_last);
    hz_remote_name_set(
        slot->first, slot->named - 1u,
        (hz_block_t *)((uintptr_t)slot->run_first | HZ_REMOTE_RUN));
    slot->run_first = NULL;
  }
  slot->run_last = NULL;
}

/* The newest header of the slot's list names no more blocks: it gets its
 * final link, or, when it is the oldest too (whose link the push writes),
 * its count is kept for the push. */
HZ_INLINE void hz_remote_close_header(hz_stash_slot_t *slot) {
  hz_remote_run_close(slot);
  if (slot->first == slot->last)
    slot->last_named = slot->named;
  else
    hz_remote_set_link(slot->first, slot->older, slot->named);
}

/* `block` becomes the newest header of the slot's list. */
HZ_INLINE void hz_remote_stash_header(hz_stash_slot_t *slot, hz_block_t *block,
                                      size_t size) {
  hz_remote_close_header(slot);
  slot->older = slot->first;
  slot->first = block;
  slot->named = 0;
  slot->can_name = (uint16_t)hz_remote_can_name(size);
}

/* The block after `block` on its page extends a run, unless `block` is the
 * page's last. */
HZ_INLINE void hz_remote_expect(hz_stash_t *stash, const hz_block_t *block,
                                size_t size) {
  HZ_SHARED_SET(stash->run_next, (uintptr_t)block < stash->run_limit
                                     ? (uintptr_t)block + size
                                     : 0);
}

/* Is `block` the one that extends the open run? Then its page, its
 * destination and that it is a block start of the page are known. */
HZ_INLINE bool hz_remote_extends(const hz_stash_t *stash,
                                 const hz_block_t *block) {
  return (uintptr_t)block == HZ_SHARED_GET(stash->run_next);
}

/* Count into the run's slot the blocks that extended the open run since
 * it last counted: the slot's run_last, blocks and room are exact again.
 * Every stash operation that reads the run's slot or moves the open run
 * elsewhere does this first (hz_remote_stash_into, hz_remote_publish of
 * that slot, hz_remote_run_stop); hz_remote_run_goes_on does not. */
HZ_INLINE void hz_remote_settle(hz_stash_t *stash) {
  uintptr_t next = stash->run_next;
  if (next == 0) return;
  hz_stash_slot_t *slot = &stash->slots[stash->run_slot];
  uintptr_t last = next - stash->run_size;
  uint32_t n = (uint32_t)((last - (uintptr_t)slot->run_last) / stash->run_size);
  slot->run_last = (hz_block_t *)last;
  slot->blocks += n;
  slot->room -= (int32_t)n * stash->run_weight;
}

/* Where the run that now ends at `block` (the slot's run_last, its room
 * counted) stops extending on the fast path: its page's last block, or
 * the block that uses up its list's room. */
HZ_INLINE void hz_remote_plan_stop(hz_stash_t *stash,
                                   const hz_stash_slot_t *slot) {
  uint32_t more = (uint32_t)((slot->room + stash->run_weight - 1) /
                             stash->run_weight); /* room > 0: at least 1 */
  uintptr_t stop =
      (uintptr_t)slot->run_last + (uintptr_t)more * stash->run_size;
  stash->run_stop = stop < stash->run_limit ? stop : stash->run_limit;
}

/* `block` extends the open run (hz_remote_extends): the fast path only
 * moves run_next on, the slot counts later (hz_remote_settle), and the
 * next block's line is asked for, ready for the store its free makes
 * (hz_heap_free_next): that store then does not wait for the line while
 * the stores after it queue up behind it. False, nothing done, when the
 * run stops at `block`: the caller takes hz_remote_run_stop. */
HZ_INLINE bool hz_remote_run_goes_on(hz_stash_t *stash,
                                     const hz_block_t *block) {
  if (HZ_UNLIKELY((uintptr_t)block >= stash->run_stop)) return false;
  uintptr_t next = (uintptr_t)block + stash->run_size;
  HZ_SHARED_SET(stash->run_next, next);
  HZ_PREFETCH_WRITE((const void *)next);
  return true;
}

/* `block` extends the open run where it stops (hz_remote_run_goes_on was
 * false): counted in. True when the run's list is full: the caller
 * publishes slot run_slot. */
bool hz_remote_run_stop(hz_stash_t *stash, hz_block_t *block);

/* Stash `block`, which extends the open run. Returns the lists this
 * published (0 or 1). */
HZ_INLINE unsigned hz_remote_stash_next(hz_stash_t *stash, hz_block_t *block) {
  if (HZ_LIKELY(hz_remote_run_goes_on(stash, block)) ||
      !hz_remote_run_stop(stash, block))
    return 0;
  return hz_remote_publish(stash, stash->run_slot);
}

/* `block` of `page` follows the slot's last name on its page: that name
 * becomes (or stays) a run, now ending at `block`, and the blocks after it
 * extend it on the fast path (hz_remote_stash_next). */
HZ_INLINE bool hz_remote_stash_follows(hz_stash_t *stash, unsigned index,
                                       hz_block_t *block,
                                       const hz_page_t *page) {
  hz_stash_slot_t *slot = &stash->slots[index];
  size_t size = page->block_size;
  if ((uintptr_t)block - size != (uintptr_t)slot->run_last ||
      (uintptr_t)slot->run_last < (uintptr_t)hz_page_start(page))
    return false;
  if (slot->run_first == NULL) slot->run_first = slot->run_last;
  slot->run_last = block;
  stash->run_slot = index;
  stash->run_page = page;
  stash->run_owner = (uintptr_t)hz_page_owner(page);
  stash->run_weight = hz_remote_weight(size);
  stash->run_size = (uint32_t)size;
  stash->run_limit =
      (uintptr_t)hz_page_start(page) + (uintptr_t)(page->reserved - 1u) * size;
  hz_remote_expect(stash, block, size);
  return true;
}

/* `block` gets a name in the slot's newest header (a run of one block so
 * far), or becomes the newest header itself. */
HZ_INLINE void hz_remote_stash_name(hz_stash_t *stash, unsigned index,
                                    hz_block_t *block, size_t size) {
  hz_stash_slot_t *slot = &stash->slots[index];
  if (HZ_UNLIKELY(slot->run_first != NULL)) {
    if (stash->run_slot == index) /* the run it extends closes */
      HZ_SHARED_SET(stash->run_next, 0);
    hz_remote_run_close(slot);
  }
  if (slot->named >= slot->can_name) {
    hz_remote_stash_header(slot, block, size);
    return;
  }
  hz_remote_name_set(slot->first, slot->named++, block);
  slot->run_last = block;
}

/* What hz_remote_stash_into did besides stashing the block. */
#define HZ_REMOTE_FULL     1u /* the list is full: the caller publishes it */
#define HZ_REMOTE_RUN_GREW 2u /* a run grew: the blocks after it extend it */

/* Stash `block` of `page` in slot `index`, whose list is bound for the
 * block's destination already: it follows the slot's last name or gets a
 * name. Returns HZ_REMOTE_* flags. */
HZ_INLINE unsigned hz_remote_stash_into(hz_stash_t *stash, unsigned index,
                                        hz_block_t *block,
                                        const hz_page_t *page) {
  size_t size = page->block_size;
  unsigned done = 0;
  hz_remote_settle(stash);
  if (hz_remote_stash_follows(stash, index, block, page))
    done = HZ_REMOTE_RUN_GREW;
  else
    hz_remote_stash_name(stash, index, block, size);
  hz_stash_slot_t *slot = &stash->slots[index];
  slot->blocks++;
  slot->room -= hz_remote_weight(size);
  if (slot->room <= 0) return done | HZ_REMOTE_FULL;
  if (done != 0) hz_remote_plan_stop(stash, slot);
  return done;
}

/* Stash a block of `page` for `dest`. Returns the number of lists this
 * published (0, 1 or 2). Inline: a block that extends the open run, or is
 * named by the newest header, costs a few stores into lines the thread
 * holds already. */
HZ_INLINE unsigned hz_remote_stash(hz_stash_t *stash, hz_inbox_t *dest,
                                   hz_block_t *block, const hz_page_t *page) {
  if (hz_remote_extends(stash, block))
    return hz_remote_stash_next(stash, block);
  unsigned index = hz_remote_slot_index(dest);
  if (HZ_UNLIKELY(stash->slots[index].dest != dest))
    return hz_remote_stash_open(stash, index, dest, block, page);
  if (HZ_UNLIKELY(hz_remote_stash_into(stash, index, block, page) &
                  HZ_REMOTE_FULL))
    return hz_remote_publish(stash, index);
  return 0;
}

/* Publish every slot; returns the number of lists published. */
unsigned hz_remote_flush(hz_stash_t *stash);

HZ_INLINE bool hz_remote_stash_empty(const hz_stash_t *stash) {
  return stash->held == 0;
}

#endif
