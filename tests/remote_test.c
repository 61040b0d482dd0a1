/* remote: the inbox and the stash.
 *
 * Inbox: many producers push single blocks and whole lists onto one inbox
 * while its consumer drains with take_all; every block arrives exactly once.
 *
 * Stash (one freeing thread's per-destination lists):
 *   - blocks stashed for an inbox stay invisible there until the slot holds
 *     HZ_STASH_MAX_BLOCKS blocks; then exactly that list appears, in one
 *     piece and in front of what the inbox already held, and the call says
 *     it published one list;
 *   - the byte cap (HZ_STASH_MAX_BYTES, reached exactly or passed) publishes
 *     before the count cap, and a block of the cap's size goes out alone;
 *   - stashing for an inbox whose slot holds another destination publishes
 *     the other destination's list (colliding inboxes are found by trying
 *     64-byte-aligned inboxes), inboxes in different slots do not disturb
 *     each other, and the inboxes fall into exactly HZ_STASH_SLOTS slots;
 *   - hz_remote_flush publishes every slot (one list each, exact counts)
 *     and leaves the stash empty;
 *   - lists are chains of headers: every (can_name + 1)-th block stashed
 *     heads a list part and names the blocks stashed after it; the memory
 *     of the named blocks is not written at all, a list reads in exactly
 *     the reverse of the stash order, and a header names no more than its
 *     size allows (1 for 16 bytes, 7 for 64, 15 from 128 on);
 *   - a run longer than a list goes out a list at a time, each list
 *     published by the block that fills it and holding exactly its blocks;
 *   - four threads stash blocks for three inboxes (two of them sharing a
 *     slot) and flush at the end while a consumer drains with take_all:
 *     every block arrives exactly once, at the inbox it was stashed for. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "remote.h"

/* The library draws the key of encoded links at start-up; these tests link
 * the remote box alone, with a fixed key, so every link they read goes
 * through the decoding. */
hz_check_secret_t hz_check_secret = {.link = 0x5DEECE66D2545F49u};

#define PRODUCERS    4
#define PER_PRODUCER 200000
#define BATCH        7

/* A 16-byte block. The inbox test keeps its identity in the second word;
 * its lists are headers that name nothing. */
typedef struct {
  _Alignas(16) hz_block_t link;
  uint32_t producer;
  uint32_t seq;
} item_t;

_Static_assert(sizeof(item_t) == 16, "items are 16-byte blocks");

/* A block of the stash tests: as large as a header naming the most blocks
 * (the stash writes as many names as the size it is told allows). They
 * keep nothing in their memory and are told apart by address. */
typedef struct {
  _Alignas(16) hz_block_t link;
  hz_block_t *words[HZ_REMOTE_NAMES_MAX + 1];
} block_t;

/* The blocks of a published list in list order (newest first): each
 * header's named blocks from the last named, then the header. Stores at
 * most `max` in out; returns how many there are (more than max: a cycle
 * or a spoilt list). */
static size_t list_blocks(hz_block_t *head, hz_block_t **out, size_t max) {
  size_t n = 0;
  for (hz_block_t *h = head; h != NULL && n <= max;) {
    uint32_t named;
    hz_block_t *next = hz_remote_link(h, &named);
    for (uint32_t i = named; i-- > 0; n++)
      if (n < max) out[n] = hz_remote_name(h, i);
    if (n < max) out[n] = h;
    n++;
    h = next;
  }
  return n;
}

/* ---------------------------------------------------------------------------
 * Inbox: push and take_all
 * ------------------------------------------------------------------------- */
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
      hz_remote_set_link(&mine[i + k].link,
                         k + 1 < n ? &mine[i + k + 1].link : NULL, 0);
    }
    hz_remote_push(&inbox, &mine[i].link, &mine[i + n - 1].link, 0);
    i += n;
  }
  atomic_fetch_add(&producers_done, 1);
  return NULL;
}

static void test_push_take_all(void) {
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
    for (uint32_t named; b != NULL; b = hz_remote_link(b, &named)) {
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
}

/* ---------------------------------------------------------------------------
 * Stash: single-threaded
 * ------------------------------------------------------------------------- */
/* Inboxes on lines of their own, as in heaps (the stash hashes the bits
 * above the 64-byte line). */
#define LINES 64
typedef struct {
  _Alignas(64) hz_inbox_t inbox;
} line_inbox_t;
static line_inbox_t lines[LINES];

#define POOL 512
static block_t pool[POOL]; /* blocks for the single-threaded stash tests */

/* A page of `size`-byte blocks that makes no runs (its last block lies at
 * address 0): the stash tests below see the blocks named one by one. */
static const hz_page_t *page_of(size_t size) {
  static hz_page_t pages[32];
  static size_t used;
  for (size_t i = 0; i < used; i++)
    if (pages[i].block_size == size) return &pages[i];
  if (used == sizeof pages / sizeof pages[0]) abort();
  pages[used].block_size = (uint32_t)size;
  pages[used].reserved = 1;
  return &pages[used++];
}
static uint8_t marks[POOL]; /* times each pool block was taken */

static block_t *pool_block(hz_block_t *b) {
  uintptr_t a = (uintptr_t)b, base = (uintptr_t)pool;
  if (a < base || a >= base + sizeof pool || (a - base) % sizeof(block_t))
    return NULL;
  return (block_t *)b;
}

/* Take everything from `in`; check that every block is a pool block with
 * index in [lo, hi), not taken before, and that the chain ends after at most
 * POOL blocks. `tail`, when not NULL, must be the block that ends the chain
 * (what the inbox held before the list in [lo, hi) was published). Returns
 * the number of blocks in [lo, hi) taken, or (size_t)-1 on any violation. */
static size_t take_range(hz_inbox_t *in, size_t lo, size_t hi,
                         const hz_block_t *tail) {
  static hz_block_t *list[POOL + 1];
  size_t len = list_blocks(hz_remote_take_all(in), list, POOL + 1);
  if (len > POOL) return (size_t)-1; /* no end: a cycle */
  size_t n = 0;
  int bad = 0;
  if (tail != NULL) { /* the old contents end the chain, alone */
    uint32_t named;
    if (len == 0 || list[len - 1] != tail ||
        hz_remote_link(tail, &named) != NULL || named != 0)
      return (size_t)-1;
    len--;
  }
  for (size_t k = 0; k < len; k++) {
    block_t *it = pool_block(list[k]);
    if (it == NULL) return (size_t)-1;
    size_t i = (size_t)(it - pool);
    if (i < lo || i >= hi || marks[i]++ != 0) bad = 1;
    n++;
  }
  return bad ? (size_t)-1 : n;
}

static void marks_reset(void) { memset(marks, 0, sizeof marks); }

static size_t marked(size_t lo, size_t hi) {
  size_t n = 0;
  for (size_t i = lo; i < hi; i++)
    n += marks[i] == 1;
  return n;
}

/* (a) The count cap: invisible until HZ_STASH_MAX_BLOCKS, then one list. */
static void test_stash_count_cap(void) {
  enum { N = HZ_STASH_MAX_BLOCKS };
  _Static_assert(2 * N + 1 <= POOL, "pool holds two batches and a sentinel");
  _Static_assert((uint64_t)N * 16 < HZ_STASH_MAX_BYTES, "count cap first");
  hz_inbox_t *in = &lines[0].inbox;
  hz_stash_t stash = {0};
  marks_reset();
  CHECK(hz_remote_stash_empty(&stash));

  unsigned early = 0, visible = 0, empty = 0, last = 0;
  for (size_t i = 0; i < N; i++) {
    unsigned r = hz_remote_stash(&stash, in, &pool[i].link, page_of(16));
    if (i + 1 < N) {
      early += r;
      visible += hz_remote_pending(in);
      empty += hz_remote_stash_empty(&stash);
    } else {
      last = r;
    }
  }
  CHECK_MSG(early == 0, "%u lists published before the count cap", early);
  CHECK_MSG(visible == 0, "inbox non-empty %u times before the cap", visible);
  CHECK_MSG(empty == 0, "stash empty %u times while holding blocks", empty);
  CHECK_MSG(last == 1, "block %d published %u lists, not 1", N, last);
  CHECK(hz_remote_pending(in));
  CHECK(hz_remote_stash_empty(&stash));
  size_t got = take_range(in, 0, N, NULL);
  CHECK_MSG(got == N, "inbox held %zu of the %d blocks", got, N);
  CHECK(marked(0, N) == N);
  CHECK(!hz_remote_pending(in));

  /* Again, onto an inbox that already holds a block: the published list
   * goes in front of it, whole. */
  hz_block_t *sentinel = &pool[2 * N].link;
  hz_remote_push(in, sentinel, sentinel, 0);
  early = visible = last = 0;
  for (size_t i = N; i < 2 * N; i++) {
    unsigned r = hz_remote_stash(&stash, in, &pool[i].link, page_of(16));
    if (i + 1 < 2 * N) {
      early += r;
      visible += atomic_load(&in->head) != sentinel;
    } else {
      last = r;
    }
  }
  CHECK_MSG(early == 0, "second batch: %u early lists", early);
  CHECK_MSG(visible == 0, "second batch: inbox changed %u times", visible);
  CHECK(last == 1);
  got = take_range(in, N, 2 * N, sentinel);
  CHECK_MSG(got == N, "second batch: %zu blocks before the sentinel", got);
  CHECK(hz_remote_stash_empty(&stash));
  CHECK(hz_remote_flush(&stash) == 0);
  CHECK(!hz_remote_pending(in));
}

/* (b) The byte cap publishes before the count cap. */
static void test_stash_byte_cap(void) {
  enum { N = 32 };
  const uint32_t size = HZ_STASH_MAX_BYTES / N; /* 8 KiB blocks */
  _Static_assert(N < HZ_STASH_MAX_BLOCKS, "bytes reach their cap first");
  _Static_assert(HZ_STASH_MAX_BYTES % N == 0, "N blocks make the cap");
  hz_inbox_t *in = &lines[1].inbox;
  hz_stash_t stash = {0};
  marks_reset();

  /* Exactly the cap: N blocks of cap / N bytes. */
  unsigned early = 0, visible = 0, last = 0;
  for (size_t i = 0; i < N; i++) {
    unsigned r = hz_remote_stash(&stash, in, &pool[i].link, page_of(size));
    if (i + 1 < N) {
      early += r;
      visible += hz_remote_pending(in);
    } else {
      last = r;
    }
  }
  CHECK_MSG(early == 0 && visible == 0, "%u early lists, %u visible", early,
            visible);
  CHECK_MSG(last == 1, "reaching %u bytes published %u lists",
            (unsigned)HZ_STASH_MAX_BYTES, last);
  CHECK(hz_remote_stash_empty(&stash));
  size_t got = take_range(in, 0, N, NULL);
  CHECK_MSG(got == N, "byte cap: inbox held %zu of %d blocks", got, N);

  /* One byte short of the cap stays; the next block passes it. */
  early = visible = 0;
  for (size_t i = N; i < 2 * N; i++) {
    uint32_t s = i + 1 < 2 * N ? size : size - 1;
    early += hz_remote_stash(&stash, in, &pool[i].link, page_of(s));
    visible += hz_remote_pending(in);
  }
  CHECK_MSG(early == 0 && visible == 0,
            "one byte short of the cap: %u lists, %u visible", early, visible);
  CHECK(!hz_remote_stash_empty(&stash));
  last = hz_remote_stash(&stash, in, &pool[2 * N].link, page_of(16));
  CHECK_MSG(last == 1, "passing the byte cap published %u lists", last);
  got = take_range(in, N, 2 * N + 1, NULL);
  CHECK_MSG(got == N + 1, "past the cap: inbox held %zu of %d blocks", got,
            N + 1);

  /* A block of the cap's size (the 256 KiB class) goes out alone. */
  last = hz_remote_stash(&stash, in, &pool[2 * N + 1].link,
                         page_of(HZ_STASH_MAX_BYTES));
  CHECK(last == 1);
  got = take_range(in, 2 * N + 1, 2 * N + 2, NULL);
  CHECK(got == 1);
  CHECK(hz_remote_stash_empty(&stash));
}

/* Whether stashing for b right after a publishes a's list: a and b share a
 * slot. Counts anything else odd in *odd. */
static int collide(hz_inbox_t *a, hz_inbox_t *b, unsigned *odd) {
  hz_stash_t stash = {0};
  block_t *x = &pool[POOL - 2], *y = &pool[POOL - 1];
  uint32_t named_a = 1, named_b = 1;
  unsigned r1 = hz_remote_stash(&stash, a, &x->link, page_of(16));
  unsigned r2 = hz_remote_stash(&stash, b, &y->link, page_of(16));
  int a_out = atomic_load(&a->head) == &x->link;
  unsigned r3 = hz_remote_flush(&stash);
  hz_block_t *ta = hz_remote_take_all(a), *tb = hz_remote_take_all(b);
  if (r1 != 0 || r2 > 1 || r2 + r3 != 2 || (r2 == 1) != a_out ||
      ta != &x->link || tb != &y->link ||
      hz_remote_link(ta, &named_a) != NULL ||
      hz_remote_link(tb, &named_b) != NULL || named_a != 0 || named_b != 0 ||
      !hz_remote_stash_empty(&stash))
    (*odd)++;
  return r2 == 1;
}

/* Slot classes of the LINES inboxes, found by trying pairs. */
static int slot_rep[LINES]; /* index of the first inbox of each class */
static int slot_of[LINES];  /* class of each inbox */
static int slot_classes;

static void find_slots(void) {
  unsigned odd = 0, ambiguous = 0;
  slot_classes = 0;
  for (int i = 0; i < LINES; i++) {
    int cls = -1;
    for (int c = 0; c < slot_classes; c++) {
      int ab = collide(&lines[slot_rep[c]].inbox, &lines[i].inbox, &odd);
      int ba = collide(&lines[i].inbox, &lines[slot_rep[c]].inbox, &odd);
      if (ab != ba) ambiguous++;
      if (ab) {
        if (cls >= 0) ambiguous++; /* two slots at once */
        cls = c;
      }
    }
    if (cls < 0) {
      cls = slot_classes++;
      slot_rep[cls] = i;
    }
    slot_of[i] = cls;
  }
  CHECK_MSG(odd == 0, "%u probes gave inconsistent results", odd);
  CHECK_MSG(ambiguous == 0, "%u inboxes in no single slot", ambiguous);
  /* Any hash of 64 consecutive lines onto 8 slots uses them all; fewer
   * classes means fewer slots in use, more means collisions go unnoticed. */
  CHECK_MSG(slot_classes == HZ_STASH_SLOTS, "%d slot classes, expected %d",
            slot_classes, HZ_STASH_SLOTS);
}

/* Two inboxes a, b that share a slot and one, c, in another slot; false
 * when the slots found do not allow it (find_slots reported why). */
static int pick_inboxes(int *a, int *b, int *c) {
  *a = *b = *c = -1;
  for (int i = 0; i < LINES && *b < 0; i++)
    for (int j = i + 1; j < LINES && *b < 0; j++)
      if (slot_of[i] == slot_of[j]) *a = i, *b = j;
  if (*b < 0 || slot_classes < 2) return 0;
  *c = slot_rep[(slot_of[*a] + 1) % slot_classes];
  return 1;
}

/* (c) A destination whose slot is taken publishes the slot's list. */
static void test_stash_collision(void) {
  int a, b, c;
  int ok = pick_inboxes(&a, &b, &c);
  CHECK_MSG(ok, "no two inboxes share a slot, or only one slot");
  if (!ok) return;
  hz_inbox_t *ia = &lines[a].inbox, *ib = &lines[b].inbox;
  hz_inbox_t *ic = &lines[c].inbox;
  hz_stash_t stash = {0};
  marks_reset();

  unsigned pub = 0;
  for (size_t i = 0; i < 5; i++)
    pub += hz_remote_stash(&stash, ia, &pool[i].link, page_of(16));
  pub +=
      hz_remote_stash(&stash, ic, &pool[5].link, page_of(16)); /* other slot */
  CHECK_MSG(pub == 0, "different slots: %u lists published", pub);
  CHECK(!hz_remote_pending(ia) && !hz_remote_pending(ic));

  pub =
      hz_remote_stash(&stash, ib, &pool[6].link, page_of(16)); /* evicts a's */
  CHECK_MSG(pub == 1, "colliding destination published %u lists", pub);
  CHECK(!hz_remote_pending(ib));
  CHECK(!hz_remote_pending(ic));
  size_t got = take_range(ia, 0, 5, NULL);
  CHECK_MSG(got == 5, "evicted list: %zu of 5 blocks", got);

  pub = hz_remote_stash(&stash, ib, &pool[7].link, page_of(16));
  pub += hz_remote_stash(&stash, ib, &pool[8].link, page_of(16));
  CHECK(pub == 0);
  CHECK(!hz_remote_pending(ia) && !hz_remote_pending(ib));
  CHECK(!hz_remote_stash_empty(&stash));
  pub = hz_remote_flush(&stash);
  CHECK_MSG(pub == 2, "flush published %u lists, expected 2", pub);
  CHECK(take_range(ib, 6, 9, NULL) == 3);
  CHECK(take_range(ic, 5, 6, NULL) == 1);
  CHECK(!hz_remote_pending(ia));
  CHECK(hz_remote_stash_empty(&stash));
}

/* (d) Flush publishes every slot, one list each, and empties the stash. */
static void test_stash_flush(void) {
  hz_stash_t stash = {0};
  CHECK(hz_remote_flush(&stash) == 0);
  if (slot_classes != HZ_STASH_SLOTS) return; /* reported by find_slots */
  marks_reset();
  size_t lo[HZ_STASH_SLOTS + 1];
  size_t next = 0;
  unsigned pub = 0, visible = 0;
  /* Slot k holds k + 1 blocks: every slot in use, none full. */
  for (int k = 0; k < HZ_STASH_SLOTS; k++) {
    lo[k] = next;
    for (int n = 0; n <= k; n++) {
      pub += hz_remote_stash(&stash, &lines[slot_rep[k]].inbox,
                             &pool[next++].link, page_of(100));
      for (int j = 0; j < HZ_STASH_SLOTS; j++)
        visible += hz_remote_pending(&lines[slot_rep[j]].inbox);
    }
  }
  lo[HZ_STASH_SLOTS] = next;
  CHECK_MSG(pub == 0 && visible == 0,
            "filling all slots: %u lists published, %u visible", pub, visible);
  CHECK(!hz_remote_stash_empty(&stash));
  pub = hz_remote_flush(&stash);
  CHECK_MSG(pub == HZ_STASH_SLOTS, "flush published %u lists, expected %d", pub,
            HZ_STASH_SLOTS);
  CHECK(hz_remote_stash_empty(&stash));
  for (int k = 0; k < HZ_STASH_SLOTS; k++) {
    size_t got = take_range(&lines[slot_rep[k]].inbox, lo[k], lo[k + 1], NULL);
    CHECK_MSG(got == (size_t)k + 1, "slot %d: inbox held %zu of %d blocks", k,
              got, k + 1);
  }
  CHECK(marked(0, next) == next);
  CHECK(hz_remote_flush(&stash) == 0);

  /* The emptied stash works as before. */
  CHECK(hz_remote_stash(&stash, &lines[slot_rep[0]].inbox, &pool[0].link,
                        page_of(16)) == 0);
  CHECK(!hz_remote_pending(&lines[slot_rep[0]].inbox));
  CHECK(hz_remote_flush(&stash) == 1);
  CHECK(hz_remote_take_all(&lines[slot_rep[0]].inbox) == &pool[0].link);
  CHECK(hz_remote_stash_empty(&stash));
}

/* (e) The list format: headers every can_name + 1 blocks, named blocks
 * never written, the list in reverse stash order. */
static unsigned format_wrong(size_t size, size_t count) {
  hz_inbox_t *in = &lines[3].inbox;
  hz_stash_t stash = {0};
  memset(pool, 0xA5, sizeof pool);
  for (size_t i = 0; i < count; i++)
    hz_remote_stash(&stash, in, &pool[i].link, page_of(size));
  hz_remote_flush(&stash);
  hz_block_t *head = atomic_load(&in->head);
  static hz_block_t *list[POOL + 1];
  size_t len = list_blocks(hz_remote_take_all(in), list, POOL + 1);
  unsigned wrong = len != count;
  for (size_t k = 0; k < len && k < count; k++)
    wrong += list[k] != &pool[count - 1 - k].link; /* reverse stash order */
  size_t per_header = hz_remote_can_name(size) + 1;
  for (size_t i = 0; i < count; i++) {
    bool header = i % per_header == 0;
    const unsigned char *b = (const unsigned char *)&pool[i];
    size_t untouched = 0;
    for (size_t j = 0; j < sizeof pool[i]; j++)
      untouched += b[j] == 0xA5;
    if (!header && untouched != sizeof pool[i]) wrong++; /* a named block */
  }
  size_t newest = (count - 1) / per_header * per_header;
  wrong += head != &pool[newest].link;
  return wrong;
}

static void test_list_format(void) {
  static const struct {
    size_t size, count, can_name;
  } cases[] = {{16, 9, 0},   {32, 10, 2},  {64, 64, 6},   {64, 1, 6},
               {64, 8, 6},   {128, 40, 14}, {4096, 33, 15}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    CHECK_MSG(hz_remote_can_name(cases[k].size) == cases[k].can_name,
              "a %zu-byte header names %u blocks, not %zu", cases[k].size,
              hz_remote_can_name(cases[k].size), cases[k].can_name);
    unsigned wrong = format_wrong(cases[k].size, cases[k].count);
    CHECK_MSG(wrong == 0, "%zu blocks of %zu bytes: %u wrong", cases[k].count,
              cases[k].size, wrong);
  }
  /* A name written in plain over a header's (a use after free aiming at
   * another block) does not read back as that block: names are encoded. */
  hz_inbox_t *forged_in = &lines[4].inbox;
  hz_stash_t stash = {0};
  hz_remote_stash(&stash, forged_in, &pool[0].link, page_of(64));
  hz_remote_stash(&stash, forged_in, &pool[1].link, page_of(64));
  hz_remote_flush(&stash);
  hz_block_t *head = hz_remote_take_all(forged_in);
  CHECK(head == &pool[0].link && hz_remote_name(head, 0) == &pool[1].link);
  ((hz_block_t **)head)[HZ_REMOTE_NAMES_AT] = &pool[5].link;
  CHECK_MSG(hz_remote_name(head, 0) != &pool[5].link,
            "a name written in plain read back as that block");

  /* A block pushed alone names nothing, whatever its memory held. */
  hz_inbox_t *in = &lines[3].inbox;
  hz_block_t *one = &pool[0].link;
  memset(&pool[0], 0xFF, sizeof pool[0]);
  hz_remote_push_one(in, one);
  uint32_t named = 1;
  CHECK(hz_remote_take_all(in) == one && hz_remote_link(one, &named) == NULL &&
        named == 0);
}

/* (f) Runs: blocks stashed one after the other that lie one after the
 * other on their page make one name, the first block with the run bit,
 * whose first word holds the last; nothing else of the run is written. A
 * run stops at the page's last block and at a block out of order. */
static void test_runs(void) {
  hz_page_t page = {.block_size = sizeof(block_t), .reserved = 8};
  hz_page_set_start(&page, (uint8_t *)&pool[0]);
  hz_inbox_t *in = &lines[5].inbox;
  hz_stash_t stash = {0};
  memset(pool, 0xA5, sizeof pool);
  hz_page_t next = page; /* the page after it, from pool[8] on */
  hz_page_set_start(&next, (uint8_t *)&pool[8]);
  for (int i = 0; i <= 8; i++)
    hz_remote_stash(&stash, in, &pool[i].link, i < 8 ? &page : &next);
  static const int order[] = {3, 4, 6}; /* another page, a gap at 5 */
  hz_page_set_start(&page, (uint8_t *)&pool[16]);
  for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
    hz_remote_stash(&stash, in, &pool[16 + order[k]].link, &page);
  hz_remote_flush(&stash);
  hz_block_t *head = hz_remote_take_all(in);
  uint32_t named = 0;
  CHECK(head == &pool[0].link && hz_remote_link(head, &named) == NULL);
  CHECK_MSG(named == 4, "the header holds %u names, not 4", named);
  hz_block_t *want[4] = {&pool[1].link, &pool[8].link, &pool[19].link,
                         &pool[22].link};
  hz_block_t *last[4] = {&pool[7].link, NULL, &pool[20].link, NULL};
  for (uint32_t i = 0; i < 4 && i < named; i++) {
    hz_block_t *name = hz_remote_name(head, i);
    CHECK_MSG(hz_remote_run_first(name) == want[i] &&
                  hz_remote_is_run(name) == (last[i] != NULL),
              "name %u", i);
    if (last[i] != NULL)
      CHECK_MSG(hz_block_next(want[i]) == last[i], "run %u ends wrong", i);
  }
  /* Written: the header, and the first word of each run's first block. */
  for (int i = 1; i < 24; i++) {
    const unsigned char *b = (const unsigned char *)&pool[i];
    bool first = i == 1 || i == 19;
    for (size_t j = first ? sizeof(void *) : 0; j < sizeof pool[i]; j++)
      if (b[j] != 0xA5) {
        CHECK_MSG(false, "block %d of a list written at byte %zu", i, j);
        break;
      }
  }
}

/* The blocks a list holds: its headers, and what each name stands for (a
 * block, or every block of a run of `size`-byte blocks). */
static size_t list_count(hz_block_t *head, size_t size) {
  size_t n = 0;
  for (hz_block_t *h = head; h != NULL && n <= POOL;) {
    uint32_t named;
    hz_block_t *next = hz_remote_link(h, &named);
    for (uint32_t i = 0; i < named; i++) {
      hz_block_t *name = hz_remote_name(h, i);
      hz_block_t *first = hz_remote_run_first(name);
      n += hz_remote_is_run(name)
               ? ((uintptr_t)hz_block_next(first) - (uintptr_t)first) / size + 1
               : 1;
    }
    n++;
    h = next;
  }
  return n;
}

/* (g) A run longer than a list: the blocks that extend it only move
 * run_next on and are counted into their slot later, yet each list still
 * goes out at the block that fills it (every HZ_STASH_MAX_BLOCKS blocks of
 * this size) and holds exactly its blocks. */
static void test_long_run(void) {
  enum { N = 200 };
  _Static_assert(N + 100 <= POOL, "the page fits in the pool");
  hz_page_t page = {.block_size = sizeof(block_t), .reserved = N + 100};
  hz_page_set_start(&page, (uint8_t *)&pool[0]);
  hz_inbox_t *in = &lines[6].inbox;
  hz_stash_t stash = {0};
  unsigned wrong_calls = 0, wrong_lists = 0;
  for (size_t i = 0; i < N; i++) {
    unsigned r = hz_remote_stash(&stash, in, &pool[i].link, &page);
    bool fills = (i + 1) % HZ_STASH_MAX_BLOCKS == 0;
    wrong_calls += r != (fills ? 1u : 0u);
    if (r != 0 && list_count(hz_remote_take_all(in), sizeof(block_t)) !=
                      HZ_STASH_MAX_BLOCKS)
      wrong_lists++;
  }
  CHECK_MSG(wrong_calls == 0, "%u stash calls published wrongly", wrong_calls);
  CHECK_MSG(wrong_lists == 0, "%u lists not of %d blocks", wrong_lists,
            HZ_STASH_MAX_BLOCKS);
  CHECK(hz_remote_flush(&stash) == 1);
  size_t rest = list_count(hz_remote_take_all(in), sizeof(block_t));
  CHECK_MSG(rest == N % HZ_STASH_MAX_BLOCKS, "the flush published %zu blocks",
            rest);
  CHECK_MSG(stash.published == N, "%llu blocks published, not %d",
            (unsigned long long)stash.published, N);
}

/* ---------------------------------------------------------------------------
 * Stash: many producers, one consumer
 * ------------------------------------------------------------------------- */
#define STASHERS    4
#define PER_STASHER 100000
#define DESTS       3 /* 0 and 1 in different slots, 2 shares 0's slot */

static hz_inbox_t *dests[DESTS];
static block_t *stash_items[STASHERS];
static uint8_t *stash_dest[STASHERS]; /* where each block must arrive */
static unsigned stash_published[STASHERS];
static unsigned stash_left[STASHERS]; /* stash not empty after the flush */
static _Atomic int stashers_done;

static uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * UINT64_C(0x2545F4914F6CDD1D);
}

static void *stasher(void *arg) {
  uint32_t id = (uint32_t)(uintptr_t)arg;
  block_t *mine = stash_items[id];
  uint8_t *dest_of = stash_dest[id];
  uint64_t rng = UINT64_C(0x9E3779B97F4A7C15) * (id + 1);
  hz_stash_t stash = {0};
  unsigned published = 0;
  for (uint32_t i = 0; i < PER_STASHER; i++) {
    uint64_t r = rng_next(&rng);
    uint32_t d = r % 16 < 7 ? 0 : r % 16 < 14 ? 1 : 2;
    size_t size = (size_t)16 << ((r >> 8) % 10); /* 16 B .. 8 KiB */
    dest_of[i] = (uint8_t)d; /* published with the block (release) */
    published +=
        hz_remote_stash(&stash, dests[d], &mine[i].link, page_of(size));
  }
  published += hz_remote_flush(&stash);
  stash_published[id] = published;
  stash_left[id] = !hz_remote_stash_empty(&stash);
  atomic_fetch_add(&stashers_done, 1);
  return NULL;
}

/* (e) Every block arrives exactly once, at its own inbox. */
static void test_stash_threads(void) {
  int a, b, c;
  if (!pick_inboxes(&a, &b, &c)) return; /* reported by the tests above */
  for (int k = 0; k < 10; k++) /* page_of is not for threads: made here */
    page_of((size_t)16 << k);
  dests[0] = &lines[a].inbox;
  dests[1] = &lines[c].inbox;
  dests[2] = &lines[b].inbox;

  static uint8_t seen[STASHERS][PER_STASHER];
  /* An inbox holds at most every block sent to it. */
  enum { TAKEN_MAX = STASHERS * PER_STASHER };
  static hz_block_t *taken[TAKEN_MAX];
  pthread_t threads[STASHERS];
  for (int i = 0; i < STASHERS; i++) {
    stash_items[i] = calloc(PER_STASHER, sizeof(block_t));
    stash_dest[i] = calloc(PER_STASHER, 1);
    pthread_create(&threads[i], NULL, stasher, (void *)(uintptr_t)i);
  }
  size_t received = 0, duplicates = 0, misdelivered = 0, foreign = 0;
  for (;;) {
    int done = atomic_load(&stashers_done) == STASHERS;
    int pending = 0;
    for (uint32_t d = 0; d < DESTS; d++) {
      hz_block_t *head = hz_remote_take_all(dests[d]);
      size_t len = list_blocks(head, taken, TAKEN_MAX);
      if (len > TAKEN_MAX) {
        foreign++; /* a cycle, or longer than a list can be */
        len = TAKEN_MAX;
      }
      for (size_t k = 0; k < len; k++) {
        block_t *it = (block_t *)taken[k];
        int owner = -1;
        for (int p = 0; p < STASHERS; p++) {
          uintptr_t base = (uintptr_t)stash_items[p];
          if ((uintptr_t)it - base < PER_STASHER * sizeof(block_t)) owner = p;
        }
        if (owner < 0) {
          foreign++;
          break;
        }
        size_t i = (size_t)(it - stash_items[owner]);
        if (stash_dest[owner][i] != d) misdelivered++;
        if (seen[owner][i]++) duplicates++;
        received++;
      }
      pending |= hz_remote_pending(dests[d]);
    }
    if (done && !pending) break;
  }
  unsigned published = 0, left = 0;
  for (int i = 0; i < STASHERS; i++) {
    pthread_join(threads[i], NULL);
    published += stash_published[i];
    left += stash_left[i];
  }
  size_t total = (size_t)STASHERS * PER_STASHER;
  CHECK_MSG(received == total, "received %zu of %zu", received, total);
  CHECK(duplicates == 0);
  CHECK(misdelivered == 0);
  CHECK(foreign == 0);
  CHECK(left == 0);
  /* Lists hold at most HZ_STASH_MAX_BLOCKS blocks, and batching happens:
   * 7 in 16 blocks go to each of the two main inboxes. */
  CHECK_MSG(published >= total / HZ_STASH_MAX_BLOCKS && published < total / 2,
            "%u lists for %zu blocks", published, total);
  for (int i = 0; i < STASHERS; i++) {
    free(stash_items[i]);
    free(stash_dest[i]);
  }
}

int main(void) {
  test_push_take_all();
  test_stash_count_cap();
  test_stash_byte_cap();
  find_slots();
  test_stash_collision();
  test_stash_flush();
  test_list_format();
  test_runs();
  test_long_run();
  test_stash_threads();
  return check_report("remote");
}
