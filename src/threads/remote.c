/* remote: the stash (per-destination lists in the freeing thread) and the
 * inbox (one CAS per published list, one exchange per drain). */
#include "remote.h"

#include "os.h"

unsigned hz_remote_push(hz_inbox_t *inbox, hz_block_t *first, hz_block_t *last,
                        uint32_t last_named) {
  hz_block_t *head = atomic_load_explicit(&inbox->head, memory_order_relaxed);
  unsigned failed = 0;
  for (;;) {
    hz_remote_set_link(last, head, last_named);
    if (atomic_compare_exchange_weak_explicit(&inbox->head, &head, first,
                                              memory_order_release,
                                              memory_order_relaxed))
      return failed;
    failed++;
  }
}

unsigned hz_remote_push_one(hz_inbox_t *inbox, hz_block_t *block) {
  return hz_remote_push(inbox, block, block, 0);
}

hz_block_t *hz_remote_take_all(hz_inbox_t *inbox) {
  return atomic_exchange_explicit(&inbox->head, NULL, memory_order_acquire);
}

bool hz_remote_run_stop(hz_stash_t *stash, hz_block_t *block) {
  HZ_SHARED_SET(stash->run_next, (uintptr_t)block + stash->run_size);
  hz_remote_settle(stash);
  hz_stash_slot_t *slot = &stash->slots[stash->run_slot];
  if (slot->room <= 0) return true;
  if ((uintptr_t)block >= stash->run_limit)
    HZ_SHARED_SET(stash->run_next, 0); /* its page's last block */
  else
    hz_remote_plan_stop(stash, slot);
  return false;
}

unsigned hz_remote_publish(hz_stash_t *stash, unsigned index) {
  hz_stash_slot_t *slot = &stash->slots[index];
  if (slot->dest == NULL) return 0;
  if (stash->run_slot == index) hz_remote_settle(stash);
  hz_remote_close_header(slot);
  HZ_SHARED_ADD(
      stash->cas_retries,
      hz_remote_push(slot->dest, slot->first, slot->last, slot->last_named));
  HZ_SHARED_ADD(stash->published, slot->blocks);
  if (stash->opened_ns[index] != 0) {
    HZ_SHARED_ADD(stash->wait_ns, hz_os_now_ns() - stash->opened_ns[index]);
    HZ_SHARED_ADD(stash->timed, 1);
  }
  slot->dest = NULL;
  slot->first = slot->older = slot->last = NULL;
  stash->held &= ~(1u << index);
  if (stash->run_slot == index) HZ_SHARED_SET(stash->run_next, 0);
  return 1;
}

unsigned hz_remote_stash_open(hz_stash_t *stash, unsigned index,
                              hz_inbox_t *dest, hz_block_t *block,
                              const hz_page_t *page) {
  size_t size = page->block_size;
  unsigned published = hz_remote_publish(stash, index); /* settles a run */
  hz_stash_slot_t *slot = &stash->slots[index];
  slot->dest = dest;
  slot->blocks = 1;
  slot->first = slot->last = block;
  slot->older = NULL;
  slot->run_first = slot->run_last = NULL;
  slot->named = 0;
  slot->can_name = (uint16_t)hz_remote_can_name(size);
  slot->room = (int32_t)HZ_STASH_MAX_BYTES - hz_remote_weight(size);
  bool timed = stash->lists % HZ_STASH_TIME_EVERY == 0;
  HZ_SHARED_ADD(stash->lists, 1);
  stash->opened_ns[index] = timed ? hz_os_now_ns() : 0;
  stash->held |= 1u << index;
  if (slot->room <= 0) published += hz_remote_publish(stash, index);
  return published;
}

unsigned hz_remote_flush(hz_stash_t *stash) {
  unsigned published = 0;
  while (stash->held != 0) {
    unsigned index = (unsigned)__builtin_ctz(stash->held);
    published += hz_remote_publish(stash, index);
  }
  return published;
}
