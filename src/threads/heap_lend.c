/* heap_lend: lent pages, a class that turns shared (ladder.h).
 *
 * When a class turns shared, a thread's own pages of it would only empty
 * as the program freed their blocks, while the class heap cut pages for
 * the blocks it hands out in their place: the live set faulted in twice,
 * and every page that empties given back with a call to the kernel
 * (exchange: 11,300 faults and 331 madvise calls against 7,000 and 48 with
 * every class shared from the start). So at the thread's next refill from
 * the class heap (under the class's lock), its pages of the class are lent
 * whole to the class heap, free blocks and blocks in use alike: the owner
 * word changes, flags and all, and the class heap's refills take their
 * free blocks before they cut a page; pages that empty before then are
 * kept for it. The page the class's probes take from stays (route.h):
 * the probes are what its blocks do on the thread's own pages (keeping
 * the page in use at the turn held 5 MiB of exchange's peak). A block
 * freed before the page changed hands may still reach the thread's inbox:
 * its drain sends it on to the class heap. A page's slices go back into
 * its segment only by the owner of the segment's set, so the class heap
 * hands a lent page it no longer keeps (no block in use) back to that heap
 * (`returned`), whose next slow path or collection gives it back to the
 * kernel; a heap with a page out (`lent`) is not retired, its set being
 * where the page goes back (heap_pages.c). */
#include <stdatomic.h>

#include "heap_parts.h"

/* The heap's bin of `cls` refills from the shared pages from now on: its
 * own pages of the class are lent to the class heap at its refills from
 * it, blocks in use and all (hz_heap_lend_pages), and those that empty
 * meanwhile are kept for that (heap_pages.c). (Giving back the
 * memory of their free blocks instead, a call to the kernel for each page
 * of every class of every heap as the classes turned, took mt_remote main
 * R90/T16 from 4.5M to 2.8M ops/s.) */
HZ_NOINLINE void hz_heap_turn_shared(hz_heap_t *heap, uint8_t cls) {
  heap->lend_full[cls] = true;
  heap->pages.keeps_none[cls] = true;
  hz_page_t *first = heap->pages.queues[cls].first;
  if (first != NULL) first->for_probes = false; /* a probe's, turns ago */
}

/* `page`, out of the heap's queues, goes to the class heap's pages `to`,
 * lent (Lent pages): its owner word changes in one store, flags and all. */
static void page_lend(hz_heap_t *heap, hz_pages_t *to, hz_page_t *page) {
  page->lent = 1;
  atomic_fetch_add_explicit(&heap->lent, 1, memory_order_relaxed);
  hz_page_move(page, to);
}

/* A page of the heap's with blocks in use, out of its queues, lent: onto
 * the class heap's full queue (`full`), or right behind the page its
 * refills take from, where the next choice looks (hz_pages_unfull). */
static void page_lend_busy(hz_heap_t *heap, hz_pages_t *to, hz_page_t *page,
                           bool full) {
  heap->pages.busy_bytes -= hz_page_area(page);
  to->busy_bytes += hz_page_area(page);
  page_lend(heap, to, page);
  if (full)
    hz_queue_push_back(&to->full, page);
  else
    hz_queue_push_second(&to->queues[page->class_id], page);
}

/* An empty page of the heap's, out of its queues, lent: an empty page the
 * class heap keeps. */
static void page_lend_empty(hz_heap_t *heap, hz_pages_t *to, hz_page_t *page) {
  hz_pages_unempty(&heap->pages, page);
  page_lend(heap, to, page);
  hz_queue_push_back(&to->queues[page->class_id], page);
  hz_pages_keep_emptied(to, page);
}

/* The pages of `cls` on the heap's full queue, lent (once a turn: pages
 * that fill later come back through the class queue). */
static void heap_lend_full(hz_heap_t *heap, hz_pages_t *to, uint8_t cls) {
  heap->lend_full[cls] = false;
  hz_page_queue_t *full = &heap->pages.full;
  for (hz_page_t *page = full->first, *next; page != NULL; page = next) {
    next = page->next;
    if (page->class_id != cls) continue;
    hz_queue_remove(full, page);
    page_lend_busy(heap, to, page, true);
  }
}

/* Under the class's lock, at a refill of `cls` from the shared pages: the
 * heap's pages of the class go to the class heap, lent, free blocks,
 * blocks in use and all (Lent pages); but for the one the probes take
 * from while the class takes probes (`probed`). */
void hz_heap_lend_pages(hz_heap_t *heap, hz_pages_t *to, uint8_t cls,
                        bool probed) {
  if (heap->lend_full[cls]) heap_lend_full(heap, to, cls);
  hz_page_queue_t *q = &heap->pages.queues[cls];
  bool keep_first = probed && q->first != NULL && q->first->for_probes;
  hz_page_t *page;
  while ((page = keep_first ? q->first->next : q->first) != NULL) {
    hz_queue_remove(q, page);
    if (page->emptied)
      page_lend_empty(heap, to, page);
    else
      page_lend_busy(heap, to, page, false);
  }
}

/* The page the refill of a class's sample took from (its queue's first)
 * stays with the heap while the class refills from the shared pages. */
HZ_NOINLINE void hz_heap_keep_for_probes(hz_heap_t *heap, uint8_t cls) {
  hz_page_t *first = heap->pages.queues[cls].first;
  if (first != NULL) first->for_probes = true;
}
