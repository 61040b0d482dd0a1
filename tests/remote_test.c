/* remote: many producers push single blocks and whole lists onto one inbox
 * while its consumer drains with take_all; every block arrives exactly
 * once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "remote.h"

#define PRODUCERS    4
#define PER_PRODUCER 200000
#define BATCH        7

typedef struct {
  hz_block_t link;
  uint32_t producer;
  uint32_t seq;
} item_t;

static hz_inbox_t inbox;
static item_t *items[PRODUCERS];
static _Atomic int producers_done;

static void *produce(void *arg) {
  uint32_t id = (uint32_t)(uintptr_t)arg;
  item_t *mine = items[id];
  for (uint32_t i = 0; i < PER_PRODUCER;) {
    uint32_t n = (i % 3 == 0) ? 1 : BATCH; /* mix singles and lists */
    if (n > PER_PRODUCER - i) n = PER_PRODUCER - i;
    for (uint32_t k = 0; k < n; k++) {
      mine[i + k].producer = id;
      mine[i + k].seq = i + k;
      mine[i + k].link.next = k + 1 < n ? &mine[i + k + 1].link : NULL;
    }
    hz_remote_push(&inbox, &mine[i].link, &mine[i + n - 1].link);
    i += n;
  }
  atomic_fetch_add(&producers_done, 1);
  return NULL;
}

int main(void) {
  static uint8_t seen[PRODUCERS][PER_PRODUCER];
  pthread_t threads[PRODUCERS];
  for (int i = 0; i < PRODUCERS; i++) {
    items[i] = calloc(PER_PRODUCER, sizeof(item_t));
    pthread_create(&threads[i], NULL, produce, (void *)(uintptr_t)i);
  }
  size_t received = 0, duplicates = 0, drains = 0;
  for (;;) {
    int done = atomic_load(&producers_done) == PRODUCERS;
    hz_block_t *b = hz_remote_take_all(&inbox);
    if (b != NULL) drains++;
    for (; b != NULL; b = b->next) {
      item_t *it = (item_t *)b;
      if (seen[it->producer][it->seq]++) duplicates++;
      received++;
    }
    if (done && !hz_remote_pending(&inbox)) break;
  }
  for (int i = 0; i < PRODUCERS; i++)
    pthread_join(threads[i], NULL);
  CHECK_MSG(received == (size_t)PRODUCERS * PER_PRODUCER, "received %zu",
            received);
  CHECK(duplicates == 0);
  CHECK(drains > 0);
  CHECK(hz_remote_take_all(&inbox) == NULL);
  for (int i = 0; i < PRODUCERS; i++)
    free(items[i]);
  return check_report("remote");
}
