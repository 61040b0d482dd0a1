/* remote: the multi-producer / single-consumer inbox through which other
 * threads return blocks to a heap. Producers push with a CAS and never
 * touch the owner's pages; the owner takes the whole list with one
 * atomic exchange (no ABA: nothing is ever popped singly). */
#ifndef HZ_REMOTE_H
#define HZ_REMOTE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "page.h"

typedef struct {
  _Atomic(hz_block_t *) head;
} hz_inbox_t;

/* Append the list first..last (linked by next) to the inbox. */
void hz_remote_push(hz_inbox_t *inbox, hz_block_t *first, hz_block_t *last);
/* Take everything; NULL when empty. */
hz_block_t *hz_remote_take_all(hz_inbox_t *inbox);

HZ_INLINE bool hz_remote_pending(hz_inbox_t *inbox) {
  return atomic_load_explicit(&inbox->head, memory_order_relaxed) != NULL;
}

#endif
