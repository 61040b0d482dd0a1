/* heap_free: the frees the inline fast path (fast.h) did not finish: a
 * block of another heap's page (into our stash, bound for its owner's
 * inbox), a page with a flag (aligned blocks, a retired page, sampled
 * blocks, free memory given back: hz_heap_free_purged), a large block, and
 * a thread without a heap (its block goes back to the thread box, which
 * finds it one). Pointers that name no block are reported here. */
#include "heap_parts.h"
#include "large.h"
#include "prof.h"
#include "purge.h"

/* The block a free of p on this page gives back, or NULL (reported) when p
 * names none: inside a block only where memalign handed the block out
 * (its tag is cleared here, so the block is a plain one again). Other
 * threads check against the blocks that fit, not those carved. */
static hz_block_t *heap_block_to_free(const hz_page_t *page, void *p,
                                      bool owner) {
  hz_block_t *block =
      hz_page_block_named(page, p, owner ? page->capacity : page->reserved);
  if (block == NULL) hz_heap_bad_free(page, p);
  if (block != NULL && (void *)block != p) *(uintptr_t *)block = 0; /* tag */
  return block;
}

/* The stash published `lists` lists: the thread's counts go out with them. */
HZ_INLINE void heap_published(hz_heap_t *heap, uint8_t cls, unsigned lists) {
  if (lists == 0) return;
  HZ_SHARED_ADD(heap->pages.stats.batches_published, lists);
  hz_heap_publish_counts(heap, cls, false);
}

/* heap_stash_entered where the block's slot holds no list for its
 * destination: one opens with it. */
static HZ_NOINLINE void heap_stash_open(hz_heap_t *heap, hz_page_t *page,
                                        hz_block_t *block, unsigned index) {
  uint8_t cls = page->class_id;
  heap_published(heap, cls,
                 hz_remote_stash_open(&heap->stash, index,
                                      &hz_page_owner(page)->inbox, block,
                                      page));
  hz_heap_leave_stash(heap);
}

/* heap_stash_entered where the slot's list is full. */
static HZ_NOINLINE void heap_stash_full(hz_heap_t *heap, uint8_t cls,
                                        unsigned index) {
  heap_published(heap, cls, hz_remote_publish(&heap->stash, index));
  hz_heap_leave_stash(heap);
}

/* A block of another heap's page, counted, into our stash, the heap entered
 * (a collector may flush the stash); leaves it. The stash may publish the
 * block at once, and its owner may then retire the page: read what the
 * page says first, and never touch it after. The thread's counts go out
 * when a list does, not on every free. The common case (the slot's list
 * open for the destination and not full) calls nothing: opening a list and
 * publishing one are tail calls. */
HZ_INLINE void heap_stash_entered(hz_heap_t *heap, hz_page_t *page,
                                  hz_block_t *block) {
  uint8_t cls = page->class_id;
  hz_pages_t *owner = hz_page_owner(page);
  hz_heap_count_remote(heap, cls, hz_pages_of_class_heap(owner), 1);
  hz_stash_t *stash = &heap->stash;
  unsigned index = hz_remote_slot_index(&owner->inbox);
  if (HZ_UNLIKELY(stash->slots[index].dest != &owner->inbox)) {
    heap_stash_open(heap, page, block, index);
    return;
  }
  unsigned done = hz_remote_stash_into(stash, index, block, page);
  if (HZ_UNLIKELY(done & HZ_REMOTE_RUN_GREW)) /* its frees count per run */
    hz_heap_note_run(heap, cls, hz_pages_of_class_heap(owner));
  if (HZ_UNLIKELY(done & HZ_REMOTE_FULL)) {
    heap_stash_full(heap, cls, index);
    return;
  }
  hz_heap_leave_stash(heap);
}

/* A block of another heap's page into our stash, the whole way: entering
 * the heap in full waits where it must (a collector, bins taken), then the
 * stash's own entry finds the way clear. A thread holding one of the
 * allocator's locks (a signal handler's free that interrupted it) waits
 * for no collector, which may want that lock: the block goes to its
 * owner's inbox instead. */
static HZ_NOINLINE void heap_free_remote(hz_heap_t *heap, hz_page_t *page,
                                         hz_block_t *block) {
  do {
    if (HZ_UNLIKELY(hz_lock_depth != 0)) {
      hz_heap_free_orphan(page, block);
      return;
    }
    hz_heap_enter(heap);
    hz_heap_leave(heap);
  } while (!hz_heap_try_enter(heap));
  heap_stash_entered(heap, page, block);
}

/* A large block's free; `inside` (hz_heap_inside: a signal handler's
 * free that interrupted the allocator), its mapping goes straight back to
 * the kernel, past the cache, the purge's count and the profiler, which
 * take locks. */
static void heap_free_large(hz_segment_t *seg, void *p, bool inside) {
  if (seg->kind == HZ_SEGMENT_LARGE && hz_large_owns(seg, p)) {
    if (inside) {
      hz_large_free_unmap(seg);
      return;
    }
    if (HZ_UNLIKELY(hz_prof_active)) hz_prof_forget(p, NULL);
    size_t bytes = seg->map_size; /* the free may unmap seg */
    hz_large_free(seg);
    hz_purge_large_freed(bytes);
  } else if (seg->kind == HZ_SEGMENT_LARGE && hz_large_was_freed(seg, p)) {
    hz_check_fail("double free", p, 0, hz_large_usable_size(seg, p));
  } else {
    hz_check_report("invalid free", p, "not an allocated block");
  }
}

/* A block of a page with sampled blocks is freed: the profiler forgets
 * it, and the owner clears the flag once the page holds no sampled block
 * (another thread cannot; the owner's next free on the page does). */
static void heap_forget_sampled(hz_heap_t *heap, hz_page_t *page,
                                const hz_block_t *block) {
  if (!hz_prof_forget(block, page) && hz_page_owner(page) == &heap->pages)
    hz_page_set_flag(page, HZ_PAGE_SAMPLED, false);
}

/* The owner frees p on its page flagged for sampled blocks only, and the
 * profiler's filter says p is none of them: the fast path's work, and the
 * flag goes once the page holds no sampled block. False: not this case. */
static bool heap_free_unsampled(hz_heap_t *heap, hz_page_t *page, void *p) {
  if (hz_page_owner_word(page) != ((uintptr_t)heap | HZ_PAGE_SAMPLED) ||
      !hz_page_is_block(page, p, page->capacity) || hz_prof_may_be_sampled(p) ||
      !hz_check_freeing_fast(p))
    return false;
  if (!hz_prof_page_may_hold(page))
    hz_page_set_flag(page, HZ_PAGE_SAMPLED, false);
  hz_bin_t *bin = &heap->bins[page->class_id];
  hz_bin_put(heap, bin, bin->top, page, p);
  return true;
}

/* On a page whose free memory was given back (HZ_PAGE_PURGED), a free
 * block may have lost its free mark with its memory: the page's bit tells
 * whether `block` is free there already, freed twice. Asked before the
 * mark is looked for and set, so a block found free is left as it was. */
HZ_INLINE bool heap_free_on_purged_page(const hz_page_t *page,
                                        const hz_block_t *block) {
  return (hz_page_flags(page) & HZ_PAGE_PURGED) &&
         hz_page_free_now(page, hz_page_index(page, block));
}

/* Every free the fast path did not finish: a page of another heap, a page
 * with a flag (aligned or sampled blocks, purged free memory), a large
 * block, or a thread without a heap. That last case gets back the block it
 * must find a heap for (thread box); otherwise NULL, the free done. */
hz_block_t *hz_heap_free_generic(hz_heap_t *heap, hz_segment_t *seg,
                                 hz_page_t *page, void *p) {
  if (heap_free_unsampled(heap, page, p)) return NULL;
  hz_pages_t *owner = hz_page_owner(page);
  if (owner == NULL) {
    heap_free_large(seg, p, false);
    return NULL;
  }
  hz_block_t *block = heap_block_to_free(page, p, owner == &heap->pages);
  if (block == NULL) return NULL;
  if (HZ_UNLIKELY(hz_heap_page_is_retired(page)) ||
      heap_free_on_purged_page(page, block)) {
    hz_heap_double_free(page, block);
    return NULL;
  }
  if (!hz_check_freeing(block, page->class_id, page->block_size))
    return NULL; /* freed already: reported, dropped */
  if (HZ_UNLIKELY(hz_page_flags(page) & HZ_PAGE_SAMPLED))
    heap_forget_sampled(heap, page, block);
  if (heap->state == HZ_HEAP_EMPTY) return block;
  hz_heap_free_block(heap, page, block);
  return NULL;
}

void hz_heap_free_block(hz_heap_t *heap, hz_page_t *page, hz_block_t *block) {
  if (hz_page_owner(page) != &heap->pages) {
    heap_free_remote(heap, page, block);
    return;
  }
  hz_heap_free_full_bin(block, heap, page);
}

/* Another heap's plain block into the stash, checked first. */
void hz_heap_free_remote_plain(hz_heap_t *heap, hz_page_t *page, void *p) {
  if (HZ_UNLIKELY(!hz_page_is_block(page, p, page->reserved))) {
    hz_heap_bad_free(page, p);
    return;
  }
  if (HZ_UNLIKELY(!hz_check_freeing_fast(p))) {
    hz_heap_free_generic(heap, hz_segment_base(p), page, p); /* has a heap */
    return;
  }
  if (HZ_UNLIKELY(!hz_heap_try_enter(heap))) {
    heap_free_remote(heap, page, p);
    return;
  }
  heap_stash_entered(heap, page, p);
}

void hz_heap_free_purged(hz_heap_t *heap, hz_segment_t *seg, hz_page_t *page,
                         void *p) {
  bool own = hz_page_owner(page) == &heap->pages;
  uint32_t index = hz_page_index(page, p);
  if (HZ_UNLIKELY(index >= (own ? page->capacity : page->reserved))) {
    hz_heap_free_generic(heap, seg, page, p); /* reports it */
    return;
  }
  if (HZ_UNLIKELY(hz_page_free_now(page, index))) {
    hz_heap_double_free(page, p); /* its mark may be gone: the bit tells */
    return;
  }
  if (!own) {
    hz_heap_free_remote_plain(heap, page, p);
    return;
  }
  if (HZ_UNLIKELY(!hz_check_freeing_fast(p))) {
    hz_heap_free_generic(heap, seg, page, p); /* marked: reports it */
    return;
  }
  hz_bin_t *bin = &heap->bins[page->class_id];
  hz_bin_put(heap, bin, bin->top, page, p);
}

/* The open run stops at p, which extends it: counted in, and a full list
 * goes out with the counts; the heap leaves the slow path
 * hz_heap_free_next entered. */
static HZ_NOINLINE void heap_run_stops(hz_heap_t *heap, void *p) {
  if (hz_remote_run_stop(&heap->stash, p))
    heap_published(heap, heap->run_class,
                   hz_remote_publish(&heap->stash, heap->stash.run_slot));
  hz_heap_leave_stash(heap);
}

HZ_HOT(4) void hz_heap_free_next(hz_heap_t *heap, hz_page_t *page, void *p) {
  if (HZ_UNLIKELY(!hz_heap_try_enter(heap))) {
    hz_heap_free_remote_plain(heap, page, p);
    return;
  }
  if (HZ_UNLIKELY(!hz_remote_extends(&heap->stash, p)) ||
      HZ_UNLIKELY(!hz_check_freeing_fast(p))) {
    hz_heap_leave_stash(heap);
    hz_heap_free_remote_plain(heap, page, p);
    return;
  }
  /* p is the block after the run's last on the run's page: a block start,
   * bound where the run's blocks go, of the run's class. Its free mark
   * (hz_check_freeing_fast) is a store from this thread: its line leaves
   * this thread's cache written, and the owner's thread, which hands the
   * run out again in address order and whose program writes each block,
   * takes the lines at plain misses instead of first having this copy
   * dropped, line by line (docs/benchmarks.md, "Written where freed"). */
  heap->run_frees++;
  if (HZ_UNLIKELY(!hz_remote_run_goes_on(&heap->stash, p))) {
    heap_run_stops(heap, p);
    return;
  }
  hz_heap_leave_stash(heap);
}

void hz_heap_free_orphan(hz_page_t *page, hz_block_t *block) {
  uint8_t cls = page->class_id; /* the page may go once the block is home */
  hz_stats_count_orphan_free(
      cls, hz_remote_push_one(&hz_page_owner(page)->inbox, block));
}

void hz_heap_free_inside(hz_segment_t *seg, hz_page_t *page, void *p) {
  if (hz_page_owner(page) == NULL) {
    heap_free_large(seg, p, true);
    return;
  }
  hz_block_t *block =
      hz_heap_free_generic((hz_heap_t *)&hz_heap_empty, seg, page, p);
  if (block != NULL) hz_heap_free_orphan(page, block);
}
