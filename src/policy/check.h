/* check: the checks of the three build variants (config.h) and the one
 * place that reports a misuse.
 *
 * Every variant:
 *   - pointers are validated at the boundary (heap and api boxes: ours, at
 *     a block start); a bad one is reported with one line and ignored;
 *   - encoded links: a free-list link stored in a block is multiplied and
 *     offset by a key made of a per-process secret and the block's address,
 *     so a use after free that writes a freed block cannot aim the next
 *     malloc at an address of its choosing, and one that changes a few bits
 *     of it sends the link far outside its page. A decoded link that
 *     leaves its page (or, on an inbox list, our blocks) is reported;
 *     release drops the rest of that list (its blocks are lost, no other
 *     is) and goes on.
 *
 *   - free marks: from the free that gives a block back until a malloc
 *     hands it out again, its second word holds a mark made from its
 *     address and the secret (the first word is its encoded link while it
 *     is on a list). Every free, on every route, checks for the mark
 *     first: a block that carries it is freed twice, reported and dropped
 *     (release), so no copy of it is ever handed out twice.
 *
 * Secure adds, keyed by the same per-process secret:
 *   - handing out a block whose mark is gone means it was written after it
 *     was freed;
 *   - fresh blocks of a page handed out in random order; guard pages (the
 *     segment and large boxes); zeroing freed blocks (HZ_ZERO_ON_FREE).
 * Every detection prints one line and aborts.
 *
 * Debug adds fill bytes and a canary after each block (api box, through
 * hz_check_canary_*), and the internal invariant checks (HZ_ASSERT). */
#ifndef HZ_CHECK_H
#define HZ_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct {
  uintptr_t link;  /* keys free-list links */
  uintptr_t mark;  /* marks free blocks */
  uintptr_t inner; /* keys where an aligned block was handed out */
} hz_check_secret_t;

extern hz_check_secret_t hz_check_secret HZ_HIDDEN;
extern bool hz_check_zero_on_free;

/* Draw the secret and read the options; before the first block exists. */
void hz_check_init(void);

/* What a report of a spoilt list says. */
#define HZ_CHECK_CORRUPT_LIST                                                  \
  "corrupted free list (a freed block was overwritten)"

/* One line on stderr: "hakozuna: error: <what> of <p> (size class <cls>:
 * <size>-byte blocks)", or "(large block of <size> bytes)" for cls 0. The
 * secure variants then abort; release returns (the caller ignores p). */
void hz_check_fail(const char *what, const void *p, unsigned cls, size_t size)
    __attribute__((cold));
/* The same for a pointer that is no block at all: "(<context>)". */
void hz_check_report(const char *what, const void *p, const char *context)
    __attribute__((cold));

/* ---------------------------------------------------------------------------
 * Encoded links
 *
 * stored = next * HZ_CHECK_LINK_MUL + key;  next = (stored - key) *
 * HZ_CHECK_LINK_INV, mod 2^64 (MUL and INV are inverses). A change d of
 * the stored word is then exactly a change d * INV of the decoded link (a
 * flipped bit is d = +-2^i): with a plain XOR key a flipped bit is the
 * same flipped bit of the pointer, often another block of the same page.
 * INV is chosen so that every change |d| < 2^20 and every flip of one or
 * two bits moves the decoded link by at least 2^40 (tests/check_test.c
 * checks it): far outside any page, so the range check always sees it.
 * ------------------------------------------------------------------------- */
#define HZ_CHECK_LINK_MUL ((uintptr_t)0xA105BE31C4CACB55u)
#define HZ_CHECK_LINK_INV ((uintptr_t)0xF92A0F758C52D9FDu)

/* The key of the link a block holds: the secret and the block's address. */
HZ_INLINE uintptr_t hz_check_key(const void *holder) {
  return hz_check_secret.link ^ (uintptr_t)holder;
}

HZ_INLINE void *hz_check_encode(const void *holder, const void *next) {
  return (void *)((uintptr_t)next * HZ_CHECK_LINK_MUL + hz_check_key(holder));
}

HZ_INLINE void *hz_check_decode(const void *holder, const void *word) {
  return (void *)(((uintptr_t)word - hz_check_key(holder)) * HZ_CHECK_LINK_INV);
}

/* ---------------------------------------------------------------------------
 * Free marks, every variant: a free checks and sets the mark, a malloc
 * clears it (the secure variants check it there too). The mark is the one
 * rule for double frees that every route shares: a bin, a CPU cache, a
 * depot, a stash, an inbox and the page all keep a block's second word as
 * its free left it, so whichever route the first free took, the second
 * finds the mark. Not atomic: two threads freeing one block at the same
 * instant can both miss it. The purge takes the marks of the free blocks
 * whose memory it gives back; their page is flagged (page.h,
 * HZ_PAGE_PURGED) and a free there asks the page's bit first.
 * ------------------------------------------------------------------------- */
HZ_INLINE uintptr_t hz_check_mark(const void *block) {
  return (uintptr_t)block ^ hz_check_secret.mark;
}

HZ_INLINE bool hz_check_is_marked(const void *block) {
  return ((const uintptr_t *)block)[1] == hz_check_mark(block);
}

HZ_INLINE void hz_check_set_mark(void *block) {
  ((uintptr_t *)block)[1] = hz_check_mark(block);
}

HZ_INLINE void hz_check_clear_mark(void *block) { ((uintptr_t *)block)[1] = 0; }

/* A user frees `block` (a block start of class cls): true when the caller
 * is to bin or list it, zeroed if asked and marked; false when it carries
 * its mark, freed already: reported (the secure variants abort), and the
 * caller drops it. */
bool hz_check_freeing(void *block, unsigned cls, size_t size);

/* The fast path's share of hz_check_freeing: mark the block and return
 * true, or return false (nothing done) when it looks freed already or
 * must be zeroed: the caller then takes the path that calls
 * hz_check_freeing. */
HZ_INLINE bool hz_check_freeing_fast(void *block) {
  if (HZ_UNLIKELY(hz_check_is_marked(block) |
                  (HZ_SECURE && hz_check_zero_on_free)))
    return false;
  hz_check_set_mark(block);
  return true;
}

/* Report a block handed out without its mark; returns it (release). */
void *hz_check_unmarked(void *block, unsigned cls);

/* A free block is handed out: its mark goes (a live block never carries
 * one). The secure variants first check that it is still there. */
HZ_INLINE void *hz_check_handing_out(void *block, unsigned cls) {
  if (HZ_SECURE && HZ_UNLIKELY(!hz_check_is_marked(block)))
    return hz_check_unmarked(block, cls);
  hz_check_clear_mark(block);
  return block;
}

/* ---------------------------------------------------------------------------
 * Blocks handed out at an offset (every variant)
 *
 * memalign may hand out a small block at an address inside it. The block's
 * first word, in the padding before that address, then holds the address,
 * keyed: the only interior pointer a free of that block accepts, and the
 * sign that its start is not a pointer the user holds. The free clears it.
 * ------------------------------------------------------------------------- */
HZ_INLINE uintptr_t hz_check_inner_tag(const void *p) {
  return (uintptr_t)p ^ hz_check_secret.inner;
}

/* Where the block starting at `block` (of `size` bytes) was handed out
 * inside it, or NULL when it was not (its first word holds no tag). */
HZ_INLINE const uint8_t *hz_check_inner_of(const void *block, size_t size) {
  uintptr_t at = *(const uintptr_t *)block ^ hz_check_secret.inner;
  uintptr_t start = (uintptr_t)block;
  bool inside = at > start && at - start < size && (at & 15) == 0;
  return inside ? (const uint8_t *)at : NULL;
}

/* A random number, per thread (xorshift64* seeded from the secret): the
 * secure variants' order of fresh blocks, the profiler's sample gaps. */
uint64_t hz_check_random(void);

/* ---------------------------------------------------------------------------
 * Debug: canary and fill bytes
 *
 * A request for n bytes takes a block with room for n + HZ_CHECK_EXTRA:
 * [n user bytes][canary bytes ...][size word], the size word (n, keyed by
 * the block address) in the last 8 bytes of the room.
 * ------------------------------------------------------------------------- */
#define HZ_CHECK_EXTRA    48 /* at least 40 canary bytes and the size word */
#define HZ_CHECK_FRESH    0xA5
#define HZ_CHECK_FREED    0xDF
#define HZ_CHECK_CANARY_B 0xC7

/* Write the canary and size word after p[0..n) (room bytes from p), and
 * fill the n bytes with HZ_CHECK_FRESH unless `zeroed`. */
void hz_check_canary_arm(void *p, size_t n, size_t room, bool zeroed);
/* The requested size of p; reports an overrun of the canary (its distance
 * past the block's n bytes) and aborts. */
size_t hz_check_canary_verify(const void *p, size_t room, unsigned cls);
/* Fill a block being freed with HZ_CHECK_FREED. */
void hz_check_fill_freed(void *p, size_t room);

#endif
