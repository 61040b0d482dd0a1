/* page: a run of equal-sized blocks of one size class, owned by one heap,
 * and which of its blocks are free.
 *
 * A page keeps its free blocks as a bitmap, one bit per block, out of the
 * blocks themselves (in its segment's header): a freed block holds nothing
 * the allocator trusts, so a use after free cannot steer malloc, and a
 * block freed twice finds its bit set. Blocks leave the page lowest
 * address first, so consecutive mallocs walk up through memory.
 *
 * Ownership: every field is touched only by the owning heap's thread (or a
 * collector holding that heap), with three exceptions: `owner` is read by
 * any thread freeing a block of the page; on a page flagged
 * HZ_PAGE_PURGED, such a thread also reads the bit of its block
 * (hz_page_free_now); and the descriptor is handed between heaps only
 * while the page holds no live block, through the segment box under its
 * lock, but for one move: a thread's heap lends its page of a class that
 * turned shared to the class heap, blocks in use and all, under the
 * class's lock (heap_lend.c, "Lent pages"). `owner` is stable while any block
 * is live but for that move, after which the old owner's drain sends on
 * the blocks that still reach it.
 *
 * Invariant (checked in debug builds):
 *   used + |free bits| == capacity <= reserved
 * where `used` counts blocks handed out and not yet back on the page —
 * blocks cached in a bin, stashed or waiting in an inbox still count as
 * used. Blocks past `capacity` were never carved (or were carved again). */
#ifndef HZ_PAGE_H
#define HZ_PAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "config.h"
#include "sizeclass.h"

/* A freed block on its way home: its first word links it into a list
 * (stash, inbox; remote.h), stored through hz_block_next/hz_block_set_next,
 * encoded. In the secure variants the second word is the free mark
 * (check.h). */
typedef struct hz_block_s {
  struct hz_block_s *next;
} hz_block_t;

HZ_INLINE hz_block_t *hz_block_next(const hz_block_t *block) {
  return hz_check_decode(block, block->next);
}

HZ_INLINE void hz_block_set_next(hz_block_t *block, hz_block_t *next) {
  block->next = hz_check_encode(block, next);
}

/* Most blocks a page holds (16-byte blocks in a 64 KiB page), and the
 * words of its bitmap. */
#define HZ_PAGE_BLOCKS_MAX   4096
#define HZ_PAGE_BITMAP_WORDS (HZ_PAGE_BLOCKS_MAX / 64)

/* What the owner changes on every refill and every return of blocks: the
 * count of blocks out and the bitmap. Kept off the descriptor's line,
 * which every thread freeing a block of the page reads, in the segment's
 * header, one per slice. */
typedef struct {
  uint16_t used;      /* blocks handed out and not back (see above) */
  uint16_t bits_from; /* no free bit in the words below this one */
  /* No block past `capacity` holds a free mark: the page's memory read
   * as zeros when it was cut (hz_page_t.cut_zeroed), or the part never
   * carved was given back and the marks left resident at its start taken
   * (hz_page_discard_free); only blocks that hold none are carved again
   * (hz_page_uncarve). */
  bool tail_unmarked;
  /* No free block of the page holds a free mark: their memory was given
   * back (hz_page_discard_free); a block freed since lost its mark coming
   * back (hz_page_put_index). Only on a page flagged HZ_PAGE_PURGED, and
   * with tail_unmarked. */
  bool marks_gone;
  /* Bit i: block i free. Written by the owner with HZ_SHARED_SET: on a
   * page flagged HZ_PAGE_PURGED, a freeing thread reads its block's bit. */
  _Alignas(64) uint64_t bits[HZ_PAGE_BITMAP_WORDS];
} hz_page_tally_t;

struct hz_pages_s;

/* Flag bits kept in the low bits of hz_page_t.owner (heaps are 64-byte
 * aligned). Only the owner changes them; any thread may read them
 * (usable_size reads HZ_PAGE_ALIGNED). */
/* HZ_PAGE_ALIGNED: a block was handed out at an offset (the secure
 * variants: a block served an aligned request). */
#define HZ_PAGE_ALIGNED 1u
/* HZ_PAGE_RETIRED: no block in use (a spare page, or an empty one its
 * heap keeps for the next refills): any free to it is a double free. */
#define HZ_PAGE_RETIRED 2u
#define HZ_PAGE_SAMPLED 4u /* may hold blocks the profiler sampled */
/* The whole owner word of a slice inside a page of several slices (no
 * heap): the free fast path's compare fails on it, and the descriptor's
 * `next` names the page's own (segment.h). */
#define HZ_PAGE_INTERIOR 8u
/* HZ_PAGE_PURGED (release): the memory of some of its free blocks was
 * given back (hz_page_discard_free), so they read zeros and carry no free
 * mark (check.h). A free of a block on such a page asks the page's bitmap
 * whether the block is free there already (a double free): any free to
 * the page takes the generic path while the flag is set. Set by the
 * purge; cleared by the refill that leaves the page no free block (every
 * block carved is handed out: hz_page_purged_refilled), and when the page
 * is set up anew. */
#define HZ_PAGE_PURGED    16u
#define HZ_PAGE_FLAG_MASK ((uintptr_t)63)

/* 64 bytes, so segment -> descriptor is a shift. */
typedef struct hz_page_s {
  hz_page_tally_t *tally; /* its counts and bitmap (segment header) */
  /* What a refill from the page has more to do, both bytes read at once
   * (`refill_notes` nonzero): `emptied`, its heap's: an empty page kept in
   * its class queue; `purged`: flagged HZ_PAGE_PURGED, set and cleared
   * with the flag. */
  union {
    struct {
      uint8_t emptied;
      uint8_t purged;
    };
    uint16_t refill_notes;
  };
  uint8_t cut_zeroed; /* segment's: cut from slices that read as zeros */
  /* Its slices are in a segment of another heap's set than its owner's:
   * a thread's heap lent it to its class heap (heap_lend.c, "Lent
   * pages"). Cleared with the descriptor when its slices go back. */
  uint8_t lent;
  uint32_t emptied_at; /* its heap's slow paths when it emptied */
  /* Owner heap | flags, 0 when the page is free. The free fast path
   * compares it with the current heap: equal means ours and no flag set. */
  _Atomic uintptr_t owner;
  uintptr_t start_word;   /* first block, as hz_page_start reads it */
  struct hz_page_s *next; /* heap queue; an interior slice: its page */
  struct hz_page_s *prev;
  /* Its heap's: its last refill was a probe's of a class that refills
   * from the shared pages (heap_lend.c), so the heap keeps it when it lends the
   * class's pages. */
  uint8_t for_probes;
  uint8_t unused;
  uint16_t reserved; /* blocks that fit in the page */
  uint8_t class_id;
  uint8_t in_full;     /* on the heap's full queue, not its class queue */
  uint16_t area_pages; /* 4 KiB pages from start to the end (hz_page_area) */
  uint32_t capacity;   /* blocks carved out so far (32 bits: the free fast
                        * path compares with it in memory) */
  uint32_t block_size;
} hz_page_t;

_Static_assert(sizeof(hz_page_t) == 64, "page descriptor is one cache line");

/* The page's first block. Builds for memcheck (HZ_VALGRIND) keep its
 * address complemented: memcheck's leak check takes any word holding a
 * block's address for a pointer to it, and a leaked block that starts its
 * page would be counted as still reachable. Elsewhere this is one load. */
HZ_INLINE uint8_t *hz_page_start(const hz_page_t *page) {
  uintptr_t word = page->start_word;
  return (uint8_t *)(HZ_VALGRIND ? ~word : word);
}

HZ_INLINE void hz_page_set_start(hz_page_t *page, uint8_t *start) {
  uintptr_t word = (uintptr_t)start;
  page->start_word = HZ_VALGRIND ? ~word : word;
}

/* Set the page up for `class_id`, owned by `owner`: no block carved. Its
 * fresh blocks count as holding no mark only when the segment cut it from
 * memory that read as zeros (cut_zeroed, used up here): a page set up
 * again for another class may hold the marks of the blocks it had. */
void hz_page_init(hz_page_t *page, struct hz_pages_s *owner, uint8_t class_id);

/* Words of the bitmap that `blocks` blocks use. */
HZ_INLINE uint32_t hz_page_words(uint32_t blocks) { return (blocks + 63) / 64; }

/* The `n` lowest free blocks of the page (it has at least n), their bits
 * cleared, stored downwards from `top`, each below the last: the batch
 * reads as a stack whose top is the lowest. Returns the new `top`. */
HZ_INLINE void **hz_page_take_free(hz_page_t *page, void **top, uint32_t n) {
  uint8_t *start = hz_page_start(page);
  size_t size = page->block_size;
  uint64_t *bits = page->tally->bits;
  uint32_t w = page->tally->bits_from;
  for (;; w++) {
    uint64_t word = bits[w];
    while (word != 0) {
      *--top =
          start + (size_t)(w * 64 + (uint32_t)__builtin_ctzll(word)) * size;
      word &= word - 1;
      if (--n == 0) {
        HZ_SHARED_SET(bits[w], word);
        page->tally->bits_from = (uint16_t)(word != 0 ? w : w + 1);
        return top;
      }
    }
    HZ_SHARED_SET(bits[w], 0);
  }
}

/* `n` never-used blocks, in address order, stored downwards from `top`;
 * returns the new `top`. */
HZ_INLINE void **hz_page_carve(hz_page_t *page, void **top, uint32_t n) {
  uint8_t *block =
      hz_page_start(page) + (size_t)page->capacity * page->block_size;
  for (uint32_t i = 0; i < n; i++, block += page->block_size)
    *--top = block;
  HZ_SHARED_SET(page->capacity, page->capacity + n);
  return top;
}

/* The secure variants' share of hz_page_take: mark the `fresh` blocks at
 * the start of the batch and shuffle it. */
void hz_page_secure_batch(void **out, uint32_t fresh, uint32_t n);

/* Hand out up to `max` blocks into out[0..n), a stack whose top (out[n-1])
 * is the lowest address: the page's free blocks lowest address first,
 * then fresh ones carved in address order (release writes nothing into
 * them, so memory is first touched by the program that gets it). The
 * secure variants shuffle each batch and mark the fresh blocks (check.h).
 * Returns n; the caller holds them as used. *unmarked: how many blocks at
 * the bottom of the batch, out[0..*unmarked), hold no free mark and may
 * be memory nobody touched (fresh ones on a page cut from memory that
 * read as zeros, and all of them when the page's free memory was given
 * back too): their hand-out is to write nothing into them, or it would
 * take their first page fault inside malloc. Always 0 in the secure
 * variants, whose hand-out checks every block's mark. */
HZ_INLINE uint32_t hz_page_take(hz_page_t *page, void **out, uint32_t max,
                                uint32_t *unmarked) {
  uint32_t room = (uint32_t)page->reserved - page->tally->used;
  uint32_t n = max < room ? max : room;
  uint32_t free = page->capacity - page->tally->used;
  uint32_t from_free = n < free ? n : free;
  void **top = out + n;
  if (from_free != 0) top = hz_page_take_free(page, top, from_free);
  hz_page_carve(page, top, n - from_free);
  if (HZ_SECURE) hz_page_secure_batch(out, n - from_free, n);
  const hz_page_tally_t *tally = page->tally;
  *unmarked = HZ_SECURE || !tally->tail_unmarked ? 0
              : tally->marks_gone                ? n
                                                 : n - from_free;
  return n;
}

/* The index of `block`, a block start of the page (anything else gives an
 * index past every block: sizeclass.h). */
HZ_INLINE uint32_t hz_page_index(const hz_page_t *page, const void *block) {
  uint32_t offset =
      (uint32_t)((uintptr_t)block - (uintptr_t)hz_page_start(page));
  return hz_sizeclass_block_index(page->class_id, offset);
}

HZ_INLINE bool hz_page_bit(const hz_page_t *page, uint32_t index) {
  return (page->tally->bits[index / 64] >> (index % 64)) & 1;
}

/* Is block `index` (below `reserved`) free on its page? Any thread may ask,
 * on a page flagged HZ_PAGE_PURGED; only its owner changes the bitmap. A
 * block a program may free is one handed out to it: the refill that took
 * it off its page, clearing its bit, happened before the program passed
 * it on, so a set bit seen here is a block free on its page, freed again
 * (no bit is set at or past `capacity`). */
HZ_INLINE bool hz_page_free_now(const hz_page_t *page, uint32_t index) {
  uint64_t word = HZ_SHARED_GET(page->tally->bits[index / 64]);
  return (word >> (index % 64)) & 1;
}

/* A block the program freed carries its free mark; coming back to a page
 * none of whose free blocks holds one (marks_gone) it loses it, so the
 * page stays so: its memory is resident (the program just had it), and
 * the page is flagged HZ_PAGE_PURGED, every free to it asking its bit. */
HZ_INLINE void hz_page_unmark_returned(const hz_page_t *page, uint32_t index) {
  ((uintptr_t *)(hz_page_start(page) + (size_t)index * page->block_size))[1] =
      0;
}

/* Block `index` (carved, handed out) comes back: its bit is set. `marked`:
 * the program freed it (it carries its mark); false for one a bin never
 * handed out below its fresh_end (none, and maybe memory nobody touched).
 * False, nothing changed, when the bit is set already (a double free).
 * The caller lowers `used`. */
HZ_INLINE bool hz_page_put_index(hz_page_t *page, uint32_t index, bool marked) {
  uint64_t bit = (uint64_t)1 << (index % 64);
  uint64_t *word = &page->tally->bits[index / 64];
  if (HZ_UNLIKELY(*word & bit)) return false;
  HZ_SHARED_SET(*word, *word | bit);
  if (HZ_UNLIKELY(page->tally->marks_gone) && marked)
    hz_page_unmark_returned(page, index);
  if (index / 64 < page->tally->bits_from)
    page->tally->bits_from = (uint16_t)(index / 64);
  return true;
}

/* The bits of blocks from..to in word w of the bitmap. */
HZ_INLINE uint64_t hz_page_run_mask(uint32_t w, uint32_t from, uint32_t to) {
  uint32_t low = w == from / 64 ? from % 64 : 0;
  uint32_t high = w == to / 64 ? to % 64 : 63;
  return (~(uint64_t)0 >> (63 - high)) & (~(uint64_t)0 << low);
}

/* Blocks from..to (from < to, all carved, handed out and freed by the
 * program) come back: their bits set, a word at a time, their marks taken
 * on a marks_gone page (hz_page_put_index). False, nothing changed, when a bit
 * of them is set already (a double free): the caller puts them one by one. The
 * caller lowers `used`. */
HZ_INLINE bool hz_page_put_run(hz_page_t *page, uint32_t from, uint32_t to) {
  uint64_t *bits = page->tally->bits;
  for (uint32_t w = from / 64; w <= to / 64; w++)
    if (HZ_UNLIKELY(bits[w] & hz_page_run_mask(w, from, to))) return false;
  for (uint32_t w = from / 64; w <= to / 64; w++)
    HZ_SHARED_SET(bits[w], bits[w] | hz_page_run_mask(w, from, to));
  if (HZ_UNLIKELY(page->tally->marks_gone))
    for (uint32_t i = from; i <= to; i++)
      hz_page_unmark_returned(page, i);
  if (from / 64 < page->tally->bits_from)
    page->tally->bits_from = (uint16_t)(from / 64);
  return true;
}

/* A block coming back that is the last one carved is carved again later
 * instead of marked free, so memory a thread never wrote stays untouched
 * (bins give fresh blocks back highest address first). True if it was.
 * Only blocks that hold no free mark come back so (a bin's below its
 * fresh_end): blocks carved are handed out with nothing written into them
 * (hz_page_take). Not in the secure variants, whose fresh blocks come in
 * random order. */
HZ_INLINE bool hz_page_uncarve(hz_page_t *page, const void *block) {
  if (HZ_SECURE || page->capacity == 0 ||
      (const uint8_t *)block !=
          hz_page_start(page) + (size_t)(page->capacity - 1) * page->block_size)
    return false;
  HZ_SHARED_SET(page->capacity, page->capacity - 1);
  return true;
}

/* A free block or room to carve one. */
HZ_INLINE bool hz_page_has_room(const hz_page_t *page) {
  return page->tally->used < page->reserved;
}

/* Give back the memory of the page's free blocks (whole OS pages inside
 * runs of free blocks; the secure variants keep each block's first words,
 * its free mark) and of its part never carved into blocks, keeping the
 * page in use. Owner (or a collector holding the heap) only. Release
 * flags the page HZ_PAGE_PURGED when a free block's mark went with its
 * memory; giving back at once (not `lazy`), on a page so flagged, it also
 * takes the marks of the free blocks left resident at a run's ends, so
 * none of the page's free blocks holds one (marks_gone). */
void hz_page_discard_free(hz_page_t *page, bool lazy);
/* A refill took blocks off a page flagged HZ_PAGE_PURGED and counted them
 * in `used`: when no free block is left on it, none lacks its mark, and
 * the flag goes. Owner only. */
void hz_page_purged_refilled(hz_page_t *page);
/* The block a pointer names among the page's first `limit` blocks (see
 * hz_page_is_block): p itself when it is a block start, the block around
 * it when p is where memalign handed that block out (check.h), NULL
 * otherwise. */
hz_block_t *hz_page_block_named(const hz_page_t *page, const void *p,
                                uint32_t limit);
/* The block containing p (p may be interior when has_aligned is set). */
hz_block_t *hz_page_block_of(const hz_page_t *page, const void *p);
/* True if p is exactly at a block boundary of the page. */
bool hz_page_is_block_start(const hz_page_t *page, const void *p);
/* Free blocks on the page (its free bits). */
uint32_t hz_page_free_count(const hz_page_t *page);

#ifdef HZ_DEBUG
void hz_page_check(const hz_page_t *page);
#else
#define hz_page_check(page) ((void)0)
#endif

HZ_INLINE uintptr_t hz_page_owner_word(const hz_page_t *page) {
  return atomic_load_explicit(&page->owner, memory_order_relaxed);
}

/* The pages of the owning heap (a thread's heap or a class heap, heap
 * box), NULL when the page is free. */
HZ_INLINE struct hz_pages_s *hz_page_owner(const hz_page_t *page) {
  return (struct hz_pages_s *)(hz_page_owner_word(page) & ~HZ_PAGE_FLAG_MASK);
}

/* Give the page to `owner` (NULL: free), clearing every flag. */
HZ_INLINE void hz_page_set_owner(hz_page_t *page, struct hz_pages_s *owner) {
  atomic_store_explicit(&page->owner, (uintptr_t)owner, memory_order_relaxed);
}

HZ_INLINE unsigned hz_page_flags(const hz_page_t *page) {
  return (unsigned)(hz_page_owner_word(page) & HZ_PAGE_FLAG_MASK);
}

HZ_INLINE bool hz_page_has_aligned(const hz_page_t *page) {
  return (hz_page_flags(page) & HZ_PAGE_ALIGNED) != 0;
}

/* The page goes to `owner`, its flags with it, in one store: a freeing
 * thread reads the old owner word or the new one, never a mix. */
HZ_INLINE void hz_page_move(hz_page_t *page, struct hz_pages_s *owner) {
  uintptr_t flags = hz_page_owner_word(page) & HZ_PAGE_FLAG_MASK;
  atomic_store_explicit(&page->owner, (uintptr_t)owner | flags,
                        memory_order_relaxed);
}

/* Owner only: set or clear flag bits. */
HZ_INLINE void hz_page_set_flag(hz_page_t *page, unsigned bit, bool on) {
  uintptr_t w = hz_page_owner_word(page);
  w = on ? (w | bit) : (w & ~(uintptr_t)bit);
  atomic_store_explicit(&page->owner, w, memory_order_relaxed);
}

/* True if p is the start of one of the page's first `limit` blocks: the
 * carved ones (capacity) for the owner, the ones that fit (reserved) for
 * other threads, which must not read capacity. */
HZ_INLINE bool hz_page_is_block(const hz_page_t *page, const void *p,
                                uint32_t limit) {
  return hz_page_index(page, p) < limit;
}

/* Bytes from the page's first block to its end (start and end lie on
 * 4 KiB boundaries: a slice, the segment header's end, the guard page). */
HZ_INLINE size_t hz_page_area(const hz_page_t *page) {
  return (size_t)page->area_pages << 12;
}

HZ_INLINE void hz_page_set_area(hz_page_t *page, size_t bytes) {
  page->area_pages = (uint16_t)(bytes >> 12);
}

HZ_INLINE uint8_t *hz_page_end(const hz_page_t *page) {
  return hz_page_start(page) + hz_page_area(page);
}

HZ_INLINE bool hz_page_all_free(const hz_page_t *page) {
  return page->tally->used == 0;
}

#endif
