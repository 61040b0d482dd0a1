/* remote: the stash (per-destination lists in the freeing thread) and the
 * inbox (one CAS per published list, one exchange per drain). */
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

unsigned hz_remote_push_one(hz_inbox_t *inbox, hz_block_t *block, size_t size) {
  hz_block_t **skip = hz_remote_skip_slot(block, size);
  if (skip != NULL) *skip = NULL;
  return hz_remote_push(inbox, block, block);
}

hz_block_t *hz_remote_take_all(hz_inbox_t *inbox) {
  return atomic_exchange_explicit(&inbox->head, NULL, memory_order_acquire);
}

/* Heaps are at least 64-byte aligned: hash the bits above that. */
static unsigned stash_slot_index(const hz_inbox_t *dest) {
  uint32_t h = (uint32_t)((uintptr_t)dest >> 6) * 0x9E3779B1u;
  return h >> (32 - 3);
}
_Static_assert(HZ_STASH_SLOTS == 8, "stash_slot_index yields 3 bits");

static unsigned stash_publish(hz_stash_t *stash, unsigned index) {
  hz_stash_slot_t *slot = &stash->slots[index];
  if (slot->count == 0) return 0;
  HZ_SHARED_ADD(stash->cas_retries,
                hz_remote_push(slot->dest, slot->first, slot->last));
  if (slot->opened_ns != 0) {
    HZ_SHARED_ADD(stash->wait_ns, hz_os_now_ns() - slot->opened_ns);
    HZ_SHARED_ADD(stash->timed, 1);
  }
  slot->first = slot->last = NULL;
  slot->count = slot->bytes = 0;
  stash->held &= ~(1u << index);
  return 1;
}

unsigned hz_remote_stash(hz_stash_t *stash, hz_inbox_t *dest, hz_block_t *block,
                         size_t size) {
  unsigned index = stash_slot_index(dest);
  hz_stash_slot_t *slot = &stash->slots[index];
  unsigned published = 0;
  if (slot->dest != dest) {
    published = stash_publish(stash, index);
    slot->dest = dest;
  }
  hz_block_t **recent = &slot->recent[slot->count % HZ_STASH_SKIP];
  hz_block_t **skip = hz_remote_skip_slot(block, size);
  if (skip != NULL) *skip = slot->count >= HZ_STASH_SKIP ? *recent : NULL;
  *recent = block;
  hz_block_set_next(block, slot->first);
  if (slot->first == NULL) {
    slot->last = block;
    bool timed = stash->lists % HZ_STASH_TIME_EVERY == 0;
    HZ_SHARED_ADD(stash->lists, 1);
    slot->opened_ns = timed ? hz_os_now_ns() : 0;
  }
  slot->first = block;
  slot->count++;
  slot->bytes += (uint32_t)size;
  stash->held |= 1u << index;
  if (slot->count >= HZ_STASH_MAX_BLOCKS || slot->bytes >= HZ_STASH_MAX_BYTES)
    published += stash_publish(stash, index);
  return published;
}

unsigned hz_remote_flush(hz_stash_t *stash) {
  unsigned published = 0;
  while (stash->held != 0) {
    unsigned index = (unsigned)__builtin_ctz(stash->held);
    published += stash_publish(stash, index);
  }
  return published;
}
