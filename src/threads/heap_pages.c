/* heap_pages: a heap's pages. Each class has a queue of pages that may
 * have free blocks (the first is the one refills take from; empty pages
 * kept for the next refills come last) and the full queue holds the pages
 * with none; empty pages beyond those a heap keeps go to its spares, a few
 * of each kind, or back to their segment; a refill that finds no page with
 * room takes a spare or cuts a fresh page from the heap's segments. The
 * bins' side of a page (a block out, a block back) is heap.c's and
 * heap_spill.c's. */
#include <stdatomic.h>

#include "heap_parts.h"
#include "options.h"

/* Spare pages: empty, every block free, kept per kind. */
static const uint8_t spare_max[HZ_HEAP_SPARE_KINDS] = {
    [HZ_KIND_SMALL] = 4,  /* 256 KiB */
    [HZ_KIND_MEDIUM] = 2, /* 256 KiB */
    [HZ_KIND_WIDE] = 2,   /* 1 MiB */
    [HZ_KIND_BIG] = 1,
};

static hz_page_kind_t page_kind(const hz_page_t *page) {
  return hz_segment_kind_for(page->block_size);
}

/* The page is the one the probes of its class take from (route.h): the
 * first of its class queue, and the last refill from it was a probe's. */
static bool page_for_probes(const hz_pages_t *pages, const hz_page_t *page) {
  return page->for_probes && page == pages->queues[page->class_id].first;
}

/* The pages of the page's class only empty now, and none is kept, but
 * for the one the probes take from (keeps_none). */
static bool page_only_empties(const hz_pages_t *pages, const hz_page_t *page) {
  return pages->keeps_none[page->class_id] && !page_for_probes(pages, page);
}

/* Lent pages coming back. */
static hz_heap_t *heap_of_set(hz_segment_set_t *set) {
  return (hz_heap_t *)(void *)((char *)set -
                               offsetof(hz_heap_t, pages.segments));
}

/* A lent page (heap_lend.c) with no live block onto its lender's `returned`:
 * flagged retired (a free to it is reported) until the lender frees it. */
static void lent_page_return(hz_page_t *page) {
  hz_heap_t *lender = heap_of_set(hz_segment_set_of_page(page));
  hz_page_set_flag(page, HZ_PAGE_RETIRED, true);
  hz_page_t *head =
      atomic_load_explicit(&lender->returned, memory_order_relaxed);
  do {
    page->next = head;
  } while (!atomic_compare_exchange_weak_explicit(&lender->returned, &head,
                                                  page, memory_order_release,
                                                  memory_order_relaxed));
}

void hz_heap_give_returned(hz_heap_t *heap) {
  hz_page_t *page =
      atomic_exchange_explicit(&heap->returned, NULL, memory_order_acquire);
  while (page != NULL) {
    hz_page_t *next = page->next;
    hz_segment_page_give_back(page);
    atomic_fetch_sub_explicit(&heap->lent, 1, memory_order_relaxed);
    page = next;
  }
}

/* `page` (no live block) back to its segment, its memory at once or a
 * purge delay later; a lent one to its lender. */
static void page_give(hz_page_t *page, bool at_once) {
  if (page->lent)
    lent_page_return(page);
  else if (at_once)
    hz_segment_page_give_back(page);
  else
    hz_segment_page_free(page);
}

/* Keep an empty page for reuse, or give it back to its segment. A spare
 * page is flagged retired: the free fast path leaves it to the generic
 * path, which reports any free to it (all its blocks are free already). */
static void pages_spare_push(hz_pages_t *pages, hz_page_t *page) {
  hz_page_kind_t kind = page_kind(page);
  if (page_only_empties(pages, page) || pages->gone) {
    page_give(page, true);
    return;
  }
  if (pages->spare_count[kind] >= spare_max[kind]) {
    page_give(page, false);
    return;
  }
  hz_page_set_flag(page, HZ_PAGE_RETIRED, true);
  page->prev = NULL;
  page->next = pages->spare[kind];
  pages->spare[kind] = page;
  pages->spare_count[kind]++;
  HZ_SHARED_ADD(pages->kept_bytes, hz_page_area(page));
}

/* A spare page of `kind`, preferring one already cut for `cls`. */
static hz_page_t *pages_spare_take(hz_pages_t *pages, hz_page_kind_t kind,
                                   uint8_t cls) {
  hz_page_t **link = &pages->spare[kind];
  if (*link == NULL) return NULL;
  while (*link != NULL && (*link)->class_id != cls)
    link = &(*link)->next;
  if (*link == NULL) link = &pages->spare[kind];
  hz_page_t *page = *link;
  *link = page->next;
  page->next = NULL;
  pages->spare_count[kind]--;
  HZ_SHARED_SET(pages->kept_bytes, pages->kept_bytes - hz_page_area(page));
  hz_page_set_flag(page, HZ_PAGE_RETIRED, false);
  return page;
}

/* Every spare page back to its segment; false when there was none. */
static bool pages_spares_free(hz_pages_t *pages) {
  bool any = false;
  for (int kind = 0; kind < HZ_HEAP_SPARE_KINDS; kind++) {
    while (pages->spare[kind] != NULL) {
      hz_page_t *page = pages->spare[kind];
      pages->spare[kind] = page->next;
      HZ_SHARED_SET(pages->kept_bytes, pages->kept_bytes - hz_page_area(page));
      page_give(page, false);
      any = true;
    }
    pages->spare_count[kind] = 0;
  }
  return any;
}

void hz_pages_spare_release(hz_pages_t *pages) {
  pages_spares_free(pages);
  hz_segment_set_trim(pages->cuts_from);
}

/* ---------------------------------------------------------------------------
 * Freeing
 * ------------------------------------------------------------------------- */
/* An empty page kept in its class queue takes blocks again, or goes. */
void hz_pages_unempty(hz_pages_t *pages, hz_page_t *page) {
  page->emptied = 0;
  hz_page_set_flag(page, HZ_PAGE_RETIRED, false);
  pages->empty_bytes -= hz_page_area(page);
  HZ_SHARED_SET(pages->kept_bytes, pages->kept_bytes - hz_page_area(page));
}

void hz_pages_retire(hz_pages_t *pages, hz_page_t *page) {
  if (page->emptied) hz_pages_unempty(pages, page);
  hz_queue_remove(page->in_full ? &pages->full : &pages->queues[page->class_id],
                  page);
  HZ_SHARED_ADD(pages->stats.pages_retired, 1);
  pages_spare_push(pages, page);
}

/* The most bytes of empty pages the heap keeps now: a share of its pages
 * in use, so a heap that churns many pages keeps enough of them to take
 * back, and one whose memory goes (a phase ends, a burst is freed) gives
 * it back as it goes. */
static size_t pages_empty_budget(const hz_pages_t *pages) {
  size_t share = pages->busy_bytes / 4 * pages->empty_quarters;
  return share > HZ_HEAP_EMPTY_BYTES ? share : HZ_HEAP_EMPTY_BYTES;
}

/* Retire kept empty pages, the emptiest of a class at a time (each class
 * queue ends with its kept pages), until at most `budget` bytes are kept. */
static void pages_trim_empty(hz_pages_t *pages, size_t budget) {
  for (int c = 1; c < HZ_CLASS_COUNT && pages->empty_bytes > budget; c++) {
    hz_page_queue_t *q = &pages->queues[c];
    while (pages->empty_bytes > budget && q->last != NULL &&
           q->last != q->first && q->last->emptied)
      hz_pages_retire(pages, q->last);
  }
}

/* `page`, empty, in its class queue: kept, the emptiest, last in line. */
void hz_pages_keep_emptied(hz_pages_t *pages, hz_page_t *page) {
  hz_page_queue_t *q = &pages->queues[page->class_id];
  size_t area = hz_page_area(page);
  page->emptied = 1;
  page->emptied_at =
      atomic_load_explicit(&pages->activity, memory_order_relaxed);
  pages->empty_bytes += area;
  HZ_SHARED_ADD(pages->kept_bytes, area);
  hz_page_set_flag(page, HZ_PAGE_RETIRED, true); /* a free to it: reported */
  if (q->first != page && q->last != page) {
    hz_queue_remove(q, page);
    hz_queue_push_back(q, page);
  }
}

/* A page whose blocks all came back stays in its class queue, last in line
 * (the refills take it before they cut a fresh page), until it has been
 * empty for HZ_HEAP_EMPTY_AGE of the heap's slow paths (pages_age_empty,
 * heap.c), while the heap keeps no more such pages than pages_empty_budget; a
 * collection takes them all. Retired at once, pages churned: a producer
 * whose consumers send whole batches home empties the pages it filled
 * together (batch_queue 2x2-8-2048: 21,000 pages cut, 3,000 with 4 MiB
 * kept), and a heap whose blocks of 64-128 KiB come home from other
 * threads (mt_remote cross128 R90/T4) cut 6,000 pages with 4 MiB kept,
 * faulting their memory in again and again (0.6 of the speed and 1.7
 * times the peak RSS of keeping them). A fixed larger bound churned less
 * but held memory freed in small pages from wide ones, and 64 MiB freed
 * to an idle owner past 200 ms (the reuse, purge and exited tests): the
 * share of pages in use follows both. The page refills take from stays
 * regardless. A kept page is flagged retired like a spare one: no block
 * of it is live, so the free fast path leaves any free to it to the
 * generic path, which reports a double free. */
void hz_pages_emptied(hz_pages_t *pages, hz_page_t *page) {
  hz_page_queue_t *q = &pages->queues[page->class_id];
  size_t area = hz_page_area(page);
  pages->busy_bytes -= area;
  size_t budget = pages_empty_budget(pages);
  if (q->first != page && pages->empty_bytes + area > budget) {
    hz_pages_retire(pages, page);
    pages_trim_empty(pages, budget);
    return;
  }
  hz_pages_keep_emptied(pages, page);
}

/* A page leaves the full queue with a few blocks back: among the fullest
 * of its class, so it goes right behind the page refills take from, where
 * the next choice looks first. */
void hz_pages_unfull(hz_pages_t *pages, hz_page_t *page) {
  hz_queue_remove(&pages->full, page);
  page->in_full = 0;
  hz_queue_push_second(&pages->queues[page->class_id], page);
}

/* New pages. */
/* Give every kept empty page and spare page back to the heap's segments;
 * false when there were none. */
static bool pages_release_kept(hz_pages_t *pages) {
  bool any = pages->empty_bytes != 0;
  pages_trim_empty(pages, 0);
  return pages_spares_free(pages) || any;
}

/* A fresh page from the heap's segments. Before they grow by a segment,
 * the empty pages the heap keeps go back to them: memory freed in pages of
 * one size serves pages of another before more is mapped. */
static hz_page_t *pages_cut(hz_pages_t *pages, hz_page_kind_t kind) {
  hz_page_t *page = hz_segment_page_cut(pages->cuts_from, kind);
  if (page == NULL && pages_release_kept(pages))
    page = hz_segment_page_cut(pages->cuts_from, kind);
  return page != NULL ? page : hz_segment_page_alloc(pages->cuts_from, kind);
}

/* A page for class `cls` with room: a spare page (one of the class keeps
 * its bitmap: every block free), or a fresh one from the segments. */
hz_page_t *hz_pages_new_page(hz_pages_t *pages, uint8_t cls) {
  hz_page_kind_t kind = hz_segment_kind_for(hz_sizeclass_block_size(cls));
  hz_page_t *page = pages_spare_take(pages, kind, cls);
  if (page != NULL && page->class_id == cls) return page;
  if (page == NULL) {
    page = pages_cut(pages, kind);
    if (page == NULL) return NULL;
    HZ_SHARED_ADD(pages->stats.pages_acquired, 1);
    if (hz_remote_pending(&pages->inbox))
      HZ_SHARED_ADD(pages->stats.pages_fresh_pending, 1);
  }
  hz_page_init(page, pages, cls);
  return page;
}

/* A refill took blocks off a page with notes: kept empty, it is in use
 * again; purged (HZ_PAGE_PURGED), the flag goes once no free block is
 * left on it. One test of both on every refill. */
HZ_NOINLINE void hz_pages_refilled_noted(hz_pages_t *pages, hz_page_t *page) {
  if (page->emptied) hz_pages_unempty(pages, page);
  if (page->purged) hz_page_purged_refilled(page);
}

/* Collecting. */
void hz_pages_release_empty(hz_pages_t *pages) {
  for (int c = 0; c < HZ_CLASS_COUNT; c++) {
    hz_page_t *page = pages->queues[c].first;
    while (page != NULL) {
      hz_page_t *next = page->next;
      if (page->tally->used == 0) hz_pages_retire(pages, page);
      page = next;
    }
  }
  hz_pages_spare_release(pages);
}

void hz_pages_discard_free(hz_pages_t *pages) {
  bool lazy = hz_option_enabled(HZ_OPTION_PURGE_MADV_FREE);
  for (int c = 0; c < HZ_CLASS_COUNT; c++)
    for (hz_page_t *page = pages->queues[c].first; page; page = page->next)
      hz_page_discard_free(page, lazy);
  for (hz_page_t *page = pages->full.first; page != NULL; page = page->next)
    hz_page_discard_free(page, lazy);
}

void hz_pages_summarize(const hz_pages_t *pages, hz_heap_summary_t *out) {
  hz_stats_heap_add(&out->counters, &pages->stats);
  out->bytes_kept_empty += HZ_SHARED_GET(pages->kept_bytes);
}

bool hz_pages_look_idle(hz_pages_t *pages, uint64_t now_ms, uint64_t *idle_ms) {
  uint32_t n = atomic_load_explicit(&pages->activity, memory_order_relaxed);
  if (n != pages->collect_seen) { /* active since the last look */
    pages->collect_seen = n;
    pages->idle_since_ms = now_ms;
    pages->collect_clean = false;
    return false;
  }
  *idle_ms = now_ms - pages->idle_since_ms;
  return true;
}

void hz_pages_collected_clean(hz_pages_t *pages) {
  pages->collect_seen =
      atomic_load_explicit(&pages->activity, memory_order_relaxed);
  pages->collect_clean = true;
}
