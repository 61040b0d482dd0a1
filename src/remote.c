/* remote: the stash (per-page runs, gathered into per-destination lists in
 * the freeing thread) and the inbox (one CAS per published list, one
 * exchange per drain). */
#include "remote.h"

#include "os.h"

unsigned hz_remote_push(hz_inbox_t *inbox, hz_block_t *first,
                        hz_block_t *last) {
  hz_block_t *head = atomic_load_explicit(&inbox->head, memory_order_relaxed);
  unsigned failed = 0;
  for (;;) {
    hz_block_set_next(last, head);
    if (atomic_compare_exchange_weak_explicit(&inbox->head, &head, first,
                                              memory_order_release,
                                              memory_order_relaxed))
      return failed;
    failed++;
  }
}

hz_block_t *hz_remote_take_all(hz_inbox_t *inbox) {
  return atomic_exchange_explicit(&inbox->head, NULL, memory_order_acquire);
}

/* ---------------------------------------------------------------------------
 * Run descriptors: the distance from the run's first block to its last
 * (signed: runs grow at the front) and its length, keyed like a link.
 * ------------------------------------------------------------------------- */
static void run_describe(hz_block_t *head, hz_block_t *tail, uint32_t count,
                         size_t size) {
  uintptr_t *slot = hz_remote_descriptor_slot(head, size);
  if (slot == NULL) return; /* a run of one */
  int64_t delta = (int64_t)((intptr_t)tail - (intptr_t)head);
  uintptr_t word = (uintptr_t)((uint64_t)(uint32_t)(int32_t)delta << 32 | count);
  *slot = (uintptr_t)hz_check_encode(slot, (void *)word);
}

hz_run_info_t hz_remote_run(hz_block_t *head, size_t size) {
  uintptr_t *slot = hz_remote_descriptor_slot(head, size);
  if (slot == NULL) return (hz_run_info_t){head, 1};
  uintptr_t word = (uintptr_t)hz_check_decode(slot, (void *)*slot);
  int32_t delta = (int32_t)(uint32_t)(word >> 32);
  return (hz_run_info_t){(hz_block_t *)((intptr_t)head + delta),
                         (uint32_t)word};
}

unsigned hz_remote_push_one(hz_inbox_t *inbox, hz_block_t *block, size_t size) {
  run_describe(block, block, 1, size);
  return hz_remote_push(inbox, block, block);
}

/* ---------------------------------------------------------------------------
 * Destination lists
 * ------------------------------------------------------------------------- */
static unsigned stash_publish(hz_stash_t *stash, unsigned index) {
  hz_stash_slot_t *slot = &stash->slots[index];
  if (slot->count == 0) return 0;
  HZ_SHARED_ADD(stash->cas_retries,
                hz_remote_push(slot->dest, slot->first, slot->last));
  HZ_SHARED_ADD(stash->wait_ns, hz_os_now_ns() - slot->opened_ns);
  slot->first = slot->last = NULL;
  slot->count = slot->bytes = 0;
  stash->slots_held &= ~(1u << index);
  return 1;
}

/* A closed run joins its destination's list, which may publish. */
static unsigned stash_add_run(hz_stash_t *stash, hz_run_t *run) {
  unsigned index = hz_remote_slot_index(run->dest);
  hz_stash_slot_t *slot = &stash->slots[index];
  unsigned published = 0;
  if (slot->dest != run->dest) {
    published = stash_publish(stash, index);
    slot->dest = run->dest;
  }
  run_describe(run->head, run->tail, run->count, run->size);
  hz_block_set_next(run->tail, slot->first);
  if (slot->first == NULL) {
    slot->last = run->tail;
    slot->opened_ns = hz_os_now_ns();
  }
  slot->first = run->head;
  slot->count += run->count;
  slot->bytes += run->count * run->size;
  stash->slots_held |= 1u << index;
  if (slot->count >= HZ_STASH_MAX_BLOCKS || slot->bytes >= HZ_STASH_MAX_BYTES)
    published += stash_publish(stash, index);
  return published;
}

/* ---------------------------------------------------------------------------
 * Runs
 * ------------------------------------------------------------------------- */
static unsigned run_close(hz_stash_t *stash, unsigned index) {
  hz_run_t *run = &stash->runs[index];
  run->page = NULL;
  stash->runs_held &= ~(1u << index);
  return stash_add_run(stash, run);
}

unsigned hz_remote_stash(hz_stash_t *stash, const hz_page_t *page,
                         hz_inbox_t *dest, hz_block_t *block, size_t size) {
  unsigned index = hz_remote_run_index(page);
  hz_run_t *run = &stash->runs[index];
  unsigned published = 0;
  if (run->page == page) {
    hz_block_set_next(block, run->head);
    run->head = block;
    run->count++;
  } else {
    if (run->page != NULL) published = run_close(stash, index);
    run->page = page;
    run->dest = dest;
    run->head = run->tail = block;
    run->count = 1;
    run->size = (uint32_t)size;
    stash->runs_held |= 1u << index;
  }
  if (run->count >= HZ_RUN_MAX ||
      run->count * run->size >= HZ_STASH_MAX_BYTES ||
      hz_remote_descriptor_slot(block, size) == NULL)
    published += run_close(stash, index);
  return published;
}

unsigned hz_remote_flush(hz_stash_t *stash) {
  unsigned published = 0;
  while (stash->runs_held != 0)
    published += run_close(stash, (unsigned)__builtin_ctz(stash->runs_held));
  while (stash->slots_held != 0)
    published += stash_publish(stash, (unsigned)__builtin_ctz(stash->slots_held));
  return published;
}
