/* heap_drain: the inbox taken home, a thread's heap's or a class heap's.
 * Other threads' lists of blocks freed to the heap's pages: each header's
 * blocks onto their page in one step, reading only the headers; a block
 * of a page a thread's heap lent after it was sent goes on to the class
 * heap. */
#include "heap_parts.h"
static void drain_report(const hz_block_t *header) {
  hz_check_report(HZ_CHECK_CORRUPT_LIST, header,
                  "a block sent back by another thread");
}

/* The drain's heap lent `page`, of a class heap now (owner). */
static bool drain_lent(const hz_heap_t *lender, const hz_page_t *page,
                       const hz_pages_t *owner) {
  return lender != NULL && hz_pages_of_class_heap(owner) && page->lent &&
         hz_segment_set_of_page(page) == &lender->pages.segments;
}

/* The page of a block named by a list, which must be a block of one of
 * our pages, handed out (below its capacity), or of a page we lent with
 * blocks in use (below what fits: its owner is another heap now; `lent`
 * set): otherwise (NULL) a freed block was overwritten, and what it names
 * (an attacker's address, or a block still live) must not be handed
 * out. */
static hz_page_t *drain_page_of(const hz_pages_t *pages,
                                const hz_heap_t *lender,
                                const hz_block_t *block, bool *lent) {
  hz_segment_t *seg = hz_segment_of(block);
  if (seg == NULL || seg->kind == HZ_SEGMENT_LARGE) return NULL;
  hz_page_t *page = hz_segment_page_of(seg, block);
  hz_pages_t *owner = hz_page_owner(page);
  *lent = owner != pages && drain_lent(lender, page, owner);
  if ((owner != pages && !*lent) ||
      !hz_page_is_block(page, block, *lent ? page->reserved : page->capacity))
    return NULL;
  return page;
}

/* One drain: the page it applies blocks to, kept in registers (lists
 * often run along one page), and the blocks applied to it not yet
 * counted off its `used`. A page the heap lent after the blocks were sent
 * (`lent`, a thread's heap's drain: `lender`): they go on to its class
 * heap instead, through its stash. */
typedef struct {
  hz_pages_t *pages;
  hz_heap_t *lender;
  hz_page_t *page;
  uintptr_t start;
  uintptr_t area; /* 0: no page yet */
  uint32_t back;
  bool lent;
  uint64_t blocks;
} drain_t;

/* Count the blocks applied to the drain's page off its `used`: it may
 * leave the full queue, or empty and go. */
static void drain_settle(drain_t *d) {
  if (d->page != NULL && !d->lent)
    hz_pages_returned(d->pages, d->page, d->back);
  d->page = NULL;
  d->area = 0;
  d->back = 0;
}

/* The drain moves to the page of `block`; false when it is none of ours. */
static HZ_NOINLINE bool drain_move(drain_t *d, const hz_block_t *block) {
  drain_settle(d);
  hz_page_t *page = drain_page_of(d->pages, d->lender, block, &d->lent);
  if (page == NULL) return false;
  d->page = page;
  d->start = (uintptr_t)hz_page_start(page);
  d->area = hz_page_area(page);
  return true;
}

/* The drain is at the page of `block`, a block of ours. */
HZ_INLINE bool drain_locate(drain_t *d, const hz_block_t *block) {
  return HZ_LIKELY((uintptr_t)block - d->start < d->area) ||
         drain_move(d, block);
}

/* What applying a block to its page found. */
typedef enum { DRAIN_APPLIED, DRAIN_TWICE, DRAIN_SPOILT } drain_result_t;

/* Blocks first..last of a page the heap lent (drain_t) go on to its class
 * heap through the stash, each a block start that fits the page. */
/* [condition: lent-forward] */
static HZ_NOINLINE drain_result_t drain_forward(drain_t *d,
                                                const hz_block_t *first,
                                                const hz_block_t *last) {
  hz_page_t *page = d->page;
  if ((uintptr_t)last - d->start >= d->area ||
      !hz_page_is_block(page, first, page->reserved) ||
      !hz_page_is_block(page, last, page->reserved) || last < first)
    return DRAIN_SPOILT;
  for (const uint8_t *b = (const uint8_t *)first; b <= (const uint8_t *)last;
       b += page->block_size) {
    hz_heap_send_home(d->lender, page, (hz_block_t *)(uintptr_t)b);
    d->blocks++;
  }
  return DRAIN_APPLIED;
}

/* Set the bit of `block` on its page, without reading the block. TWICE
 * (reported) when the bit was set already: another thread freed it too.
 * SPOILT when it is no block of ours handed out. */
HZ_INLINE drain_result_t drain_block(drain_t *d, const hz_block_t *block) {
  if (!drain_locate(d, block)) return DRAIN_SPOILT;
  if (HZ_UNLIKELY(d->lent)) return drain_forward(d, block, block);
  uint32_t index = hz_page_index(d->page, block);
  if (HZ_UNLIKELY(index >= d->page->capacity)) return DRAIN_SPOILT;
  if (HZ_UNLIKELY(!hz_page_put_index(d->page, index, true))) {
    hz_heap_double_free(d->page, block); /* freed again by another thread */
    return DRAIN_TWICE;
  }
  d->back++, d->blocks++;
  return DRAIN_APPLIED;
}

/* Set the bits of a run's blocks, `first` (its name without the run bit)
 * to the last it holds, a word of the bitmap at a time, reading `first`
 * and nothing else. A block whose bit is set already is reported, the
 * others applied. SPOILT when the run's last is no block of the page after
 * `first`. */
static drain_result_t drain_run(drain_t *d, const hz_block_t *first) {
  if (!drain_locate(d, first)) return DRAIN_SPOILT;
  const hz_block_t *last = hz_block_next(first);
  hz_page_t *page = d->page;
  if (HZ_UNLIKELY(d->lent)) return drain_forward(d, first, last);
  if ((uintptr_t)last - d->start >= d->area) return DRAIN_SPOILT;
  uint32_t from = hz_page_index(page, first);
  uint32_t to = hz_page_index(page, last);
  if (HZ_UNLIKELY(to >= page->capacity || from >= to)) return DRAIN_SPOILT;
  if (HZ_UNLIKELY(!hz_page_put_run(page, from, to))) {
    for (uint32_t i = from; i <= to; i++) /* one freed twice at least */
      if (drain_block(d, (const hz_block_t *)(hz_page_start(page) +
                                              (size_t)i * page->block_size)) ==
          DRAIN_SPOILT)
        return DRAIN_SPOILT;
    return DRAIN_APPLIED;
  }
  d->back += to - from + 1, d->blocks += to - from + 1;
  return DRAIN_APPLIED;
}

/* Apply a name: a block, or a run of one page's blocks. */
HZ_INLINE drain_result_t drain_name(drain_t *d, const hz_block_t *name) {
  if (hz_remote_is_run(name)) return drain_run(d, hz_remote_run_first(name));
  return drain_block(d, name);
}

/* Apply a header and what it names to their pages, reading the header
 * (and a run's first block) and nothing else. Returns the next header, or
 * NULL where the list must end: after a spoilt link or name (reported; the
 * rest of the list is lost), or at a header already back on its page. Two
 * threads that free one block both make it a header of their lists, and
 * the second's link overwrites the first's: it may lead back into the list
 * (a block freed by two threads made its owner loop here), so the header
 * is applied first and a list never goes on past one seen before. */
static hz_block_t *drain_header(drain_t *d, hz_block_t *header) {
  if (!drain_locate(d, header)) {
    drain_report(header);
    return NULL;
  }
  /* Read the header before its block is applied: that may empty its page,
   * which may then go back to the kernel (heap_pages.c). */
  uint32_t named;
  hz_block_t *next = hz_remote_link(header, &named);
  bool fine = named <= hz_remote_can_name(d->page->block_size);
  hz_block_t *names[HZ_REMOTE_NAMES_MAX];
  for (uint32_t i = 0; fine && i < named; i++)
    names[i] = hz_remote_name(header, i);
  drain_result_t own = drain_block(d, header);
  if (own == DRAIN_TWICE) return NULL;
  if (own == DRAIN_SPOILT) {
    drain_report(header);
    return NULL;
  }
  if (next != NULL) __builtin_prefetch(next);
  for (uint32_t i = 0; fine && i < named; i++)
    fine = drain_name(d, names[i]) != DRAIN_SPOILT;
  if (fine) return next;
  drain_report(header);
  return NULL;
}

/* Take every block received through the inbox home: each header's blocks
 * onto their page in one step (bits set, the count lowered), reading only
 * the headers. The blocks stay where they are until a refill hands them
 * out, lowest address first. A spoilt link or name is reported and ends
 * the list: the blocks after it are lost. */
static void drain_inbox(hz_pages_t *pages, hz_heap_t *lender) {
  hz_block_t *header = hz_remote_take_all(&pages->inbox);
  if (header == NULL) return;
  HZ_SHARED_ADD(pages->stats.inbox_drains, 1);
  drain_t d = {.pages = pages, .lender = lender};
  uint64_t headers = 0;
  for (; header != NULL; headers++)
    header = drain_header(&d, header);
  drain_settle(&d);
  HZ_SHARED_ADD(pages->stats.drained_blocks, d.blocks);
  HZ_SHARED_ADD(pages->stats.drained_headers, headers);
}

void hz_heap_drain_inbox(hz_heap_t *heap) { drain_inbox(&heap->pages, heap); }

void hz_pages_drain_inbox(hz_pages_t *pages) { drain_inbox(pages, NULL); }
