/* remote: the inbox and the stash.
 *
 * Inbox: many producers push single blocks and whole lists onto one inbox
 * while its consumer drains with take_all; every block arrives exactly once.
 *
 * Runs (one freeing thread's stash; pages are keys, never read):
 *   - a block pushed alone reads back as a run of one, whatever its second
 *     word held;
 *   - K blocks of one page stashed and flushed arrive as one run: its
 *     first block is the last stashed, its descriptor names the first
 *     stashed and K, its links pass each block once, and its last block
 *     leads to what the inbox held before;
 *   - blocks stay invisible until HZ_STASH_MAX_BLOCKS of one page make a
 *     run that fills its list: that call publishes one list of one run;
 *   - the byte cap: 8 KiB blocks publish at the 32nd (256 KiB), and a
 *     block of 256 KiB goes out alone at once;
 *   - blocks of two pages in different run slots, interleaved, arrive as
 *     two runs in one list; two pages in one run slot, interleaved, close
 *     each other's runs: as many runs as alternations;
 *   - destinations: 64 consecutive 64-byte inboxes use all HZ_STASH_SLOTS
 *     list slots, and 64 consecutive page descriptors all HZ_STASH_RUNS
 *     run slots; a run closing for an inbox whose list slot holds another
 *     destination publishes the other destination's list;
 *   - hz_remote_flush closes every run and publishes every list, and
 *     leaves the stash empty;
 *   - four threads stash blocks of many pages for three inboxes (two of
 *     them sharing a list slot) and flush at the end while a consumer
 *     drains with take_all, walking run by run: every block arrives
 *     exactly once, at the inbox it was stashed for, in a run of its own
 *     page with the right length. */
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
 * the stash tests keep nothing in their blocks (the stash may write both
 * words) and tell blocks apart by address. */
typedef struct {
  _Alignas(16) hz_block_t link;
  uint32_t producer;
  uint32_t seq;
} item_t;

_Static_assert(sizeof(item_t) == 16, "items are 16-byte blocks");

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
      hz_block_set_next(&mine[i + k].link,
                        k + 1 < n ? &mine[i + k + 1].link : NULL);
    }
    hz_remote_push(&inbox, &mine[i].link, &mine[i + n - 1].link);
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
    for (; b != NULL; b = hz_block_next(b)) {
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
 * above the 64-byte line), and page descriptors, used as keys only. */
#define LINES 64
typedef struct {
  _Alignas(64) hz_inbox_t inbox;
} line_inbox_t;
static line_inbox_t lines[LINES];
#define PAGES 64
static hz_page_t pages[PAGES];

#define POOL 512
static item_t pool[POOL];   /* blocks for the single-threaded stash tests */
static uint8_t marks[POOL]; /* times each pool block was taken */

static item_t *pool_item(hz_block_t *b) {
  uintptr_t a = (uintptr_t)b, base = (uintptr_t)pool;
  if (a < base || a >= base + sizeof pool || (a - base) % sizeof(item_t))
    return NULL;
  return (item_t *)b;
}

static void marks_reset(void) { memset(marks, 0, sizeof marks); }

/* What an inbox held, walked run by run. */
typedef struct {
  size_t blocks, runs;
  size_t run_len[POOL]; /* length of each run, in list order */
  bool bad;             /* a block outside [lo, hi), twice, or no end */
  bool tail_seen;
} taken_t;

/* Take everything from `in` and walk it run by run (blocks of `size`
 * bytes): every block a pool block with index in [lo, hi), not taken
 * before; each run's descriptor names a block its links reach in exactly
 * that many steps. `tail`, when not NULL, is what the inbox held before:
 * the chain must end with it. */
static taken_t take_runs(hz_inbox_t *in, size_t lo, size_t hi, size_t size,
                         const hz_block_t *tail) {
  taken_t t = {0};
  hz_block_t *head = hz_remote_take_all(in);
  while (head != NULL && t.runs < POOL) {
    if (tail != NULL && head == tail) {
      t.tail_seen = true;
      t.bad |= hz_block_next(head) != NULL;
      break;
    }
    hz_run_info_t run = hz_remote_run(head, size);
    hz_block_t *b = head;
    size_t n = 0;
    for (;;) {
      item_t *it = pool_item(b);
      size_t i = it != NULL ? (size_t)(it - pool) : 0;
      if (it == NULL || i < lo || i >= hi || marks[i]++ != 0 ||
          n >= run.count) {
        t.bad = true;
        return t;
      }
      n++;
      if (b == run.tail) break;
      b = hz_block_next(b);
    }
    t.bad |= n != run.count;
    t.run_len[t.runs++] = n;
    t.blocks += n;
    head = hz_block_next(run.tail);
  }
  t.bad |= t.runs >= POOL; /* no end: a cycle */
  t.bad |= tail != NULL && !t.tail_seen;
  return t;
}

/* (a) A block pushed alone is a run of one. */
static void test_push_one(void) {
  hz_inbox_t *in = &lines[0].inbox;
  hz_block_t *one = &pool[3].link;
  ((hz_block_t **)one)[1] = &pool[0].link; /* stale second word */
  hz_remote_push_one(in, one, 16);
  marks_reset();
  taken_t t = take_runs(in, 3, 4, 16, NULL);
  CHECK(!t.bad && t.runs == 1 && t.blocks == 1);
}

/* (b) K blocks of one page: one run, newest first, ending at the inbox's
 * old contents. */
static void test_one_run(void) {
  hz_inbox_t *in = &lines[1].inbox;
  hz_block_t *sentinel = &pool[POOL - 1].link;
  hz_remote_push_one(in, sentinel, 16);
  hz_stash_t stash = {0};
  enum { K = 10 };
  unsigned pub = 0;
  for (size_t i = 0; i < K; i++)
    pub += hz_remote_stash(&stash, &pages[0], in, &pool[i].link, 16);
  CHECK_MSG(pub == 0 && hz_remote_take_all(in) == sentinel,
            "%u lists published before the flush", pub);
  hz_remote_push_one(in, sentinel, 16);
  CHECK(hz_remote_flush(&stash) == 1);
  CHECK(hz_remote_stash_empty(&stash));
  hz_block_t *head = atomic_load(&in->head);
  hz_run_info_t run = hz_remote_run(head, 16);
  CHECK_MSG(head == &pool[K - 1].link && run.tail == &pool[0].link &&
                run.count == K,
            "run head %p tail %p count %u", (void *)head, (void *)run.tail,
            run.count);
  marks_reset();
  taken_t t = take_runs(in, 0, K, 16, sentinel);
  CHECK_MSG(!t.bad && t.runs == 1 && t.blocks == K, "%zu runs, %zu blocks%s",
            t.runs, t.blocks, t.bad ? ", bad" : "");
}

/* (c) The count cap: invisible until a full run fills its list. */
static void test_count_cap(void) {
  enum { N = HZ_STASH_MAX_BLOCKS };
  _Static_assert(N <= HZ_RUN_MAX, "one run fills a list");
  _Static_assert((uint64_t)N * 16 < HZ_STASH_MAX_BYTES, "count cap first");
  hz_inbox_t *in = &lines[2].inbox;
  hz_stash_t stash = {0};
  unsigned early = 0, visible = 0, last = 0;
  for (size_t i = 0; i < N; i++) {
    unsigned r = hz_remote_stash(&stash, &pages[1], in, &pool[i].link, 16);
    if (i + 1 < N) {
      early += r;
      visible += hz_remote_pending(in);
    } else {
      last = r;
    }
  }
  CHECK_MSG(early == 0 && visible == 0, "before the cap: %u published, %u seen",
            early, visible);
  CHECK_MSG(last == 1, "the %dth block published %u lists", N, last);
  CHECK(hz_remote_stash_empty(&stash));
  marks_reset();
  taken_t t = take_runs(in, 0, N, 16, NULL);
  CHECK_MSG(!t.bad && t.runs == 1 && t.blocks == N, "%zu runs, %zu blocks",
            t.runs, t.blocks);
}

/* (d) The byte cap, and a block of the cap's size alone. */
static void test_byte_cap(void) {
  enum { N = 32 };
  const uint32_t size = HZ_STASH_MAX_BYTES / N; /* 8 KiB blocks */
  _Static_assert(N < HZ_STASH_MAX_BLOCKS, "bytes reach their cap first");
  hz_inbox_t *in = &lines[3].inbox;
  hz_stash_t stash = {0};
  unsigned early = 0, last = 0;
  for (size_t i = 0; i < N; i++) {
    unsigned r = hz_remote_stash(&stash, &pages[2], in, &pool[i].link, size);
    if (i + 1 < N)
      early += r + hz_remote_pending(in);
    else
      last = r;
  }
  CHECK_MSG(early == 0 && last == 1, "8 KiB blocks: %u early, last %u", early,
            last);
  marks_reset();
  taken_t t = take_runs(in, 0, N, size, NULL);
  CHECK(!t.bad && t.runs == 1 && t.blocks == N);
  CHECK(hz_remote_stash(&stash, &pages[3], in, &pool[N].link,
                        HZ_STASH_MAX_BYTES) == 1);
  t = take_runs(in, N, N + 1, HZ_STASH_MAX_BYTES, NULL);
  CHECK(!t.bad && t.runs == 1 && t.blocks == 1);
  CHECK(hz_remote_stash_empty(&stash));
}

/* Two pages with the same run slot, and two with different ones. */
static bool pick_pages(const hz_page_t **same_a, const hz_page_t **same_b,
                       const hz_page_t **other) {
  *same_a = *same_b = *other = NULL;
  for (int i = 0; i < PAGES && *same_b == NULL; i++)
    for (int j = i + 1; j < PAGES && *same_b == NULL; j++)
      if (hz_remote_run_index(&pages[i]) == hz_remote_run_index(&pages[j]))
        *same_a = &pages[i], *same_b = &pages[j];
  for (int i = 0; i < PAGES && *same_a != NULL; i++)
    if (hz_remote_run_index(&pages[i]) != hz_remote_run_index(*same_a))
      *other = &pages[i];
  return *other != NULL;
}

/* (e) Interleaved pages: their own runs, unless they share a run slot. */
static void test_pages(void) {
  bool used[HZ_STASH_RUNS] = {false};
  int slots = 0;
  for (int i = 0; i < PAGES; i++)
    if (!used[hz_remote_run_index(&pages[i])]) {
      used[hz_remote_run_index(&pages[i])] = true;
      slots++;
    }
  CHECK_MSG(slots == HZ_STASH_RUNS, "64 pages use %d of %d run slots", slots,
            HZ_STASH_RUNS);
  const hz_page_t *a, *b, *c;
  if (!pick_pages(&a, &b, &c)) {
    CHECK_MSG(false, "no two pages share a run slot");
    return;
  }
  hz_inbox_t *in = &lines[4].inbox;
  hz_stash_t stash = {0};
  enum { EACH = 10 };
  unsigned pub = 0;
  for (size_t i = 0; i < 2 * EACH; i++) /* a c a c ...: two runs */
    pub += hz_remote_stash(&stash, i % 2 ? c : a, in, &pool[i].link, 16);
  pub += hz_remote_flush(&stash);
  marks_reset();
  taken_t t = take_runs(in, 0, 2 * EACH, 16, NULL);
  CHECK_MSG(pub == 1 && !t.bad && t.runs == 2 && t.run_len[0] == EACH &&
                t.run_len[1] == EACH,
            "different slots: %u lists, %zu runs", pub, t.runs);
  pub = 0;
  for (size_t i = 0; i < 2 * EACH; i++) /* a b a b ...: a run each */
    pub += hz_remote_stash(&stash, i % 2 ? b : a, in, &pool[i].link, 16);
  pub += hz_remote_flush(&stash);
  marks_reset();
  t = take_runs(in, 0, 2 * EACH, 16, NULL);
  CHECK_MSG(pub == 1 && !t.bad && t.runs == 2 * EACH,
            "one slot: %u lists, %zu runs", pub, t.runs);
}

/* Two inboxes a, b that share a list slot and one, c, in another. */
static bool pick_inboxes(int *a, int *b, int *c) {
  *a = *b = *c = -1;
  for (int i = 0; i < LINES && *b < 0; i++)
    for (int j = i + 1; j < LINES && *b < 0; j++)
      if (hz_remote_slot_index(&lines[i].inbox) ==
          hz_remote_slot_index(&lines[j].inbox))
        *a = i, *b = j;
  for (int i = 0; i < LINES && *a >= 0; i++)
    if (hz_remote_slot_index(&lines[i].inbox) !=
        hz_remote_slot_index(&lines[*a].inbox))
      *c = i;
  return *c >= 0;
}

/* (f) A run closing for a destination whose list slot holds another
 * destination publishes the other's list; other slots stay. */
static void test_destinations(void) {
  bool used[HZ_STASH_SLOTS] = {false};
  int slots = 0;
  for (int i = 0; i < LINES; i++)
    if (!used[hz_remote_slot_index(&lines[i].inbox)]) {
      used[hz_remote_slot_index(&lines[i].inbox)] = true;
      slots++;
    }
  CHECK_MSG(slots == HZ_STASH_SLOTS, "64 inboxes use %d of %d list slots",
            slots, HZ_STASH_SLOTS);
  int a, b, c;
  const hz_page_t *pa, *pb, *pc;
  if (!pick_inboxes(&a, &b, &c) || !pick_pages(&pa, &pb, &pc)) {
    CHECK_MSG(false, "no inboxes or pages that share a slot");
    return;
  }
  hz_inbox_t *ia = &lines[a].inbox, *ib = &lines[b].inbox;
  hz_inbox_t *ic = &lines[c].inbox;
  hz_stash_t stash = {0};
  unsigned pub = 0;
  /* pa's and pb's runs share a run slot: each closes the one before. */
  pub += hz_remote_stash(&stash, pa, ia, &pool[0].link, 16);
  pub += hz_remote_stash(&stash, pc, ic, &pool[1].link, 16);
  pub += hz_remote_stash(&stash, pb, ib, &pool[2].link, 16); /* a's run in */
  CHECK_MSG(pub == 0 && !hz_remote_pending(ia),
            "a run joining its list published %u", pub);
  pub = hz_remote_stash(&stash, pa, ia, &pool[3].link, 16); /* b's run in */
  CHECK_MSG(pub == 1 && hz_remote_pending(ia) && !hz_remote_pending(ib) &&
                !hz_remote_pending(ic),
            "b's run took a's list slot: %u lists published", pub);
  marks_reset();
  taken_t t = take_runs(ia, 0, 1, 16, NULL);
  CHECK(!t.bad && t.blocks == 1);
  pub = hz_remote_flush(&stash);
  CHECK_MSG(pub == 3, "flush published %u lists, expected 3", pub);
  t = take_runs(ib, 2, 3, 16, NULL);
  CHECK(!t.bad && t.blocks == 1);
  t = take_runs(ic, 1, 2, 16, NULL);
  CHECK(!t.bad && t.blocks == 1);
  t = take_runs(ia, 3, 4, 16, NULL);
  CHECK(!t.bad && t.blocks == 1);
  CHECK(hz_remote_stash_empty(&stash) && hz_remote_flush(&stash) == 0);
}

/* ---------------------------------------------------------------------------
 * Stash: many producers, one consumer
 * ------------------------------------------------------------------------- */
#define STASHERS    4
#define PER_STASHER 100000
#define PAGE_BLOCKS 100 /* blocks of one page, in each stasher's array */
#define DESTS       3   /* 0 and 2 share a list slot, 1 has another */

static hz_inbox_t *dests[DESTS];
static item_t *stash_items[STASHERS];
static hz_page_t stash_pages[STASHERS][PER_STASHER / PAGE_BLOCKS];
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

/* Each page goes to one destination and has one block size. */
static uint32_t page_dest(size_t page) { return (uint32_t)(page * 7 % DESTS); }
static size_t page_size(size_t page) { return (size_t)16 << (page % 10); }

static void *stasher(void *arg) {
  uint32_t id = (uint32_t)(uintptr_t)arg;
  item_t *mine = stash_items[id];
  uint64_t rng = UINT64_C(0x9E3779B97F4A7C15) * (id + 1);
  hz_stash_t stash = {0};
  unsigned published = 0;
  /* Blocks of a few pages at a time, in random order: runs of many
   * lengths. */
  uint32_t left[8], next[8], base = 0;
  for (int w = 0; w < 8; w++)
    left[w] = 0;
  for (uint32_t done = 0; done < PER_STASHER;) {
    int w = (int)(rng_next(&rng) % 8);
    if (left[w] == 0) {
      if (base == PER_STASHER) continue;
      next[w] = base;
      left[w] = PAGE_BLOCKS;
      base += PAGE_BLOCKS;
    }
    uint32_t i = next[w]++;
    left[w]--;
    size_t page = i / PAGE_BLOCKS;
    mine[i].producer = id;
    published += hz_remote_stash(&stash, &stash_pages[id][page],
                                 dests[page_dest(page)], &mine[i].link,
                                 page_size(page));
    done++;
  }
  published += hz_remote_flush(&stash);
  stash_published[id] = published;
  stash_left[id] = !hz_remote_stash_empty(&stash);
  atomic_fetch_add(&stashers_done, 1);
  return NULL;
}

/* The stasher and index of a block, or -1. */
static int owner_of(const hz_block_t *b, size_t *index) {
  for (int p = 0; p < STASHERS; p++) {
    uintptr_t base = (uintptr_t)stash_items[p];
    if ((uintptr_t)b - base < PER_STASHER * sizeof(item_t) &&
        ((uintptr_t)b - base) % sizeof(item_t) == 0) {
      *index = ((uintptr_t)b - base) / sizeof(item_t);
      return p;
    }
  }
  return -1;
}

typedef struct {
  size_t received, duplicates, misdelivered, foreign, bad_runs, runs;
} arrivals_t;

/* Walk one run taken from inbox d. False: the list cannot be followed. */
static bool receive_run(hz_block_t **head, uint32_t d, arrivals_t *a,
                        uint8_t (*seen)[PER_STASHER]) {
  size_t i;
  int owner = owner_of(*head, &i);
  if (owner < 0) {
    a->foreign++;
    return false;
  }
  size_t page = i / PAGE_BLOCKS;
  hz_run_info_t run = hz_remote_run(*head, page_size(page));
  hz_block_t *b = *head;
  for (uint32_t n = 1;; n++) {
    int o = owner_of(b, &i);
    if (o != owner || i / PAGE_BLOCKS != page || n > run.count) {
      a->bad_runs++;
      return false;
    }
    if (page_dest(page) != d) a->misdelivered++;
    if (seen[o][i]++) a->duplicates++;
    a->received++;
    if (b == run.tail) {
      a->bad_runs += n != run.count;
      break;
    }
    b = hz_block_next(b);
  }
  a->runs++;
  *head = hz_block_next(run.tail);
  return true;
}

/* (g) Every block arrives exactly once, at its own inbox, in its run. */
static void test_stash_threads(void) {
  int a, b, c;
  if (!pick_inboxes(&a, &b, &c)) return; /* reported by the tests above */
  dests[0] = &lines[a].inbox;
  dests[1] = &lines[c].inbox;
  dests[2] = &lines[b].inbox;

  static uint8_t seen[STASHERS][PER_STASHER];
  pthread_t threads[STASHERS];
  for (int i = 0; i < STASHERS; i++) {
    stash_items[i] = calloc(PER_STASHER, sizeof(item_t));
    pthread_create(&threads[i], NULL, stasher, (void *)(uintptr_t)i);
  }
  arrivals_t got = {0};
  for (;;) {
    int done = atomic_load(&stashers_done) == STASHERS;
    int pending = 0;
    for (uint32_t d = 0; d < DESTS; d++) {
      hz_block_t *head = hz_remote_take_all(dests[d]);
      while (head != NULL && receive_run(&head, d, &got, seen)) {
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
  CHECK_MSG(got.received == total, "received %zu of %zu", got.received, total);
  CHECK(got.duplicates == 0);
  CHECK(got.misdelivered == 0);
  CHECK(got.foreign == 0);
  CHECK(got.bad_runs == 0);
  CHECK(left == 0);
  /* Runs gather several blocks (8 pages open at a time in 16 slots), and
   * lists several runs or a full one. */
  CHECK_MSG(got.runs < total / 2, "%zu runs for %zu blocks", got.runs, total);
  CHECK_MSG(published >= total / HZ_STASH_MAX_BLOCKS && published < got.runs,
            "%u lists for %zu runs", published, got.runs);
  for (int i = 0; i < STASHERS; i++)
    free(stash_items[i]);
}

int main(void) {
  test_push_take_all();
  test_push_one();
  test_one_run();
  test_count_cap();
  test_byte_cap();
  test_pages();
  test_destinations();
  test_stash_threads();
  return check_report("remote");
}
