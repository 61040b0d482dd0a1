/* list: the intrusive doubly-linked list, written once. A list is any
 * struct with two end pointers and its nodes any struct with two link
 * pointers; the macros take the names of those four fields, so every
 * user keeps its own layout (the 64-byte page descriptor, the segment
 * header's two lists). Each expands to the few stores a hand-written
 * version has: nothing is added on any path. */
#ifndef HZ_LIST_H
#define HZ_LIST_H

#include <stddef.h>

/* Put node before the first one. */
#define HZ_LIST_PUSH_FRONT(list, first, last, node, next, prev)                \
  do {                                                                         \
    (node)->prev = NULL;                                                       \
    (node)->next = (list)->first;                                              \
    if ((list)->first != NULL)                                                 \
      (list)->first->prev = (node);                                            \
    else                                                                       \
      (list)->last = (node);                                                   \
    (list)->first = (node);                                                    \
  } while (0)

/* Put node after the last one (the front of the mirrored list). */
#define HZ_LIST_PUSH_BACK(list, first, last, node, next, prev)                 \
  HZ_LIST_PUSH_FRONT(list, last, first, node, prev, next)

/* Take node out; its links are NULL after. */
#define HZ_LIST_REMOVE(list, first, last, node, next, prev)                    \
  do {                                                                         \
    if ((node)->prev != NULL)                                                  \
      (node)->prev->next = (node)->next;                                       \
    else                                                                       \
      (list)->first = (node)->next;                                            \
    if ((node)->next != NULL)                                                  \
      (node)->next->prev = (node)->prev;                                       \
    else                                                                       \
      (list)->last = (node)->prev;                                             \
    (node)->next = (node)->prev = NULL;                                        \
  } while (0)

#endif
