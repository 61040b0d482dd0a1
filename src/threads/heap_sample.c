/* heap_sample: a bin's countdown to its next sample, the guard's or the
 * profiler's (hz_bin_t's sample_left), for a thread's bins and a class
 * heap's alike: where the next one falls, and what a sample does. */
#include "guard.h"
#include "heap_parts.h"
#include "prof.h"

/* The next sample of the bin's class after `skip` more blocks. */
static void bin_sample_after(hz_bin_t *bin, uint64_t skip) {
  uint64_t allocs = hz_bin_allocs(bin);
  bin->sample_left = skip;
  bin->alloc_mark = allocs + skip;
}

/* The next turn of the profiler (which has it when on) or the guard. */
static uint64_t sample_gap(uint8_t cls) {
  if (hz_prof_active)
    return hz_prof_blocks_to_skip(hz_sizeclass_block_size(cls));
  return hz_guard_blocks_to_skip();
}

/* The guard's classes: those that serve requests it takes. */
static bool guard_class(uint8_t cls) {
  return hz_sizeclass_block_size((uint8_t)(cls - 1)) < hz_guard_max_size();
}

void hz_bin_arm_sampling(hz_bin_t *bin, uint8_t cls) {
  if (hz_prof_active || (hz_guard_active && guard_class(cls)))
    bin_sample_after(bin, sample_gap(cls));
}

void *hz_bin_sampled(hz_bin_t *bin, void *block, size_t size) {
  hz_page_t *page = hz_segment_block_page(block);
  bin_sample_after(bin, sample_gap(page->class_id));
  if (hz_prof_active && hz_prof_record(block, size, page->block_size, page))
    hz_page_set_flag(page, HZ_PAGE_SAMPLED, true);
  return block;
}

void *hz_bin_guarded(hz_bin_t *bin, size_t size) {
  void *guarded = hz_guard_malloc(size);
  if (guarded != NULL) bin_sample_after(bin, hz_guard_blocks_to_skip());
  return guarded;
}
