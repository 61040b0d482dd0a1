/* remote: inbox push (one CAS per list) and drain (one exchange). */
#include "remote.h"

void hz_remote_push(hz_inbox_t *inbox, hz_block_t *first, hz_block_t *last) {
  hz_block_t *head = atomic_load_explicit(&inbox->head, memory_order_relaxed);
  do {
    last->next = head;
  } while (!atomic_compare_exchange_weak_explicit(
      &inbox->head, &head, first, memory_order_release, memory_order_relaxed));
}

hz_block_t *hz_remote_take_all(hz_inbox_t *inbox) {
  return atomic_exchange_explicit(&inbox->head, NULL, memory_order_acquire);
}
