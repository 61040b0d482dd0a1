/* heap_pages: how a heap uses its pages, driven through the heap box on
 * heaps of the test's own (no thread box):
 *   - remote: a batch of blocks freed by another heap in address order
 *     goes home as one header and one run: the owner reads two lines (the
 *     header, the run's first block) for 16 blocks and never touches the
 *     other 14 (they are made inaccessible while it does); the freeing
 *     heap writes the second word (zero in this variant) of each block
 *     that extends the open run, so its line leaves that thread's cache
 *     written;
 *   - fullest first: when the page refills take from runs out, the next
 *     one is the page with the fewest blocks left to hand out, then the
 *     next fullest;
 *   - emptied pages: a page whose blocks all came back stays for the next
 *     refills, flagged retired, until it has been empty for
 *     HZ_HEAP_EMPTY_AGE of the heap's slow paths; then it leaves the heap
 *     (beyond a few spare pages), its slices free in the segment; a trim
 *     returns them all;
 *   - whole refills: a bin of small blocks that no free came into since
 *     its last refill fills whole, half after a free;
 *   - kept pages follow pages in use: a heap with many pages in use keeps
 *     more emptied pages than HZ_HEAP_EMPTY_BYTES (up to twice those in
 *     use), and once its pages in use go, the kept ones go down to it. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "heap.h"
#include "heap_owner.h"
#include "page.h"
#include "segment.h"
#include "sizeclass.h"

static _Alignas(64) hz_heap_t owner, other;

static hz_page_t *page_of(void *p) { return hz_segment_block_page(p); }

/* --- remote batches ------------------------------------------------------ */
enum { BATCH = 16, BATCH_SIZE = 4096 }; /* a page of 16 blocks, 1 header */

static void remote_batch(void) {
  CHECK(hz_sizeclass_block_size(hz_sizeclass_of(BATCH_SIZE)) == BATCH_SIZE);
  /* A refill takes a fresh page of 16 blocks whole: start at its first. */
  void *blocks[BATCH];
  hz_page_t *page = NULL;
  for (int tries = 0; tries < 64 && page == NULL; tries++) {
    blocks[0] = hz_heap_malloc_small(&owner, BATCH_SIZE);
    hz_page_t *p = page_of(blocks[0]);
    if (p->reserved == BATCH && blocks[0] == (void *)hz_page_start(p)) page = p;
  }
  CHECK(page != NULL);
  if (page == NULL) return;
  for (int i = 1; i < BATCH; i++) {
    blocks[i] = hz_heap_malloc_small(&owner, BATCH_SIZE);
    CHECK(page_of(blocks[i]) == page);
  }
  /* The frees the inline free makes: the block after the third extends
   * the run the third opened. */
  for (int i = 0; i < BATCH; i++) {
    memset(blocks[i], 0xA5, BATCH_SIZE);
    bool extends =
        hz_heap_extends_run(&other, blocks[i], hz_page_owner_word(page));
    CHECK_MSG(extends == (i >= 3), "block %d: extends the run %d", i, extends);
    if (extends)
      hz_heap_free_next(&other, page, blocks[i]);
    else
      hz_heap_free_remote_plain(&other, page, blocks[i]);
    CHECK_MSG(hz_check_is_marked(blocks[i]),
              "block %d: its second word does not hold its free mark", i);
  }
  hz_heap_park(&other); /* publishes the stash: one list, one header */
  /* The first block freed heads the list and names the other 15 as one
   * run: the second block, whose first word holds the last. The drain
   * reads those two blocks and no other. */
  for (int i = 2; i < BATCH; i++)
    CHECK(mprotect(blocks[i], BATCH_SIZE, PROT_NONE) == 0);
  uint16_t used = page->tally->used;
  uint64_t headers = owner.pages.stats.drained_headers;
  uint64_t drained = owner.pages.stats.drained_blocks;
  void *small = hz_heap_malloc_small(&owner, 64); /* a slow path: drains */
  CHECK(small != NULL);
  CHECK_MSG(owner.pages.stats.drained_blocks - drained == BATCH,
            "%llu blocks taken home",
            (unsigned long long)(owner.pages.stats.drained_blocks - drained));
  CHECK_MSG(owner.pages.stats.drained_headers - headers == 1,
            "%llu headers read for %d blocks",
            (unsigned long long)(owner.pages.stats.drained_headers - headers),
            BATCH);
  CHECK(page->tally->used + BATCH == used || page->tally->used == 0);
  for (int i = 2; i < BATCH; i++)
    CHECK(mprotect(blocks[i], BATCH_SIZE, PROT_READ | PROT_WRITE) == 0);
}

/* --- fullest first and emptied pages ------------------------------------- */
/* Pages of 64 blocks: 70 emptied hold 4.4 MiB, past what a heap keeps. */
enum { SIZE = 1024, PAGES = 80, EMPTIED = 70, MAX_BLOCKS = PAGES * 64 + 64 };

static void *blocks[MAX_BLOCKS];
static int count;

/* Allocate until PAGES pages have been used up, stopping where the bin is
 * empty and the last page has no block left: the next refill must choose. */
static bool fill_pages(unsigned cls) {
  hz_bin_t *bin = &owner.bins[cls];
  int pages = 0;
  hz_page_t *last = NULL;
  while (count < MAX_BLOCKS) {
    void *p = hz_heap_malloc_small(&owner, SIZE);
    if (p == NULL) return false;
    blocks[count++] = p;
    if (page_of(p) != last) pages++, last = page_of(p);
    if (pages >= PAGES && bin->top == bin->base && !hz_page_has_room(last))
      return true;
  }
  return false;
}

/* The blocks of `page` among those allocated, freed through the inbox (as
 * a thread without a heap would), up to `n` of them. */
static int send_home(hz_page_t *page, int n) {
  int sent = 0;
  for (int i = 0; i < count && sent < n; i++)
    if (blocks[i] != NULL && page_of(blocks[i]) == page) {
      hz_heap_free_orphan(page, blocks[i]);
      blocks[i] = NULL;
      sent++;
    }
  return sent;
}

/* The n-th distinct page of 64 blocks among the blocks allocated, in
 * allocation order (a segment's first page shares its slice with the
 * header and holds fewer). */
static hz_page_t *nth_page(int n) {
  static hz_page_t *seen[PAGES * 2];
  int k = 0;
  for (int i = 0; i < count && k < PAGES * 2; i++) {
    hz_page_t *p = page_of(blocks[i]);
    bool known = p->reserved != 64;
    for (int j = 0; j < k; j++)
      known |= seen[j] == p;
    if (!known) seen[k++] = p;
  }
  return n < k ? seen[n] : NULL;
}

/* How the emptied pages stand: kept empty in their class queue, spare, or
 * back in their segment. */
static void count_emptied(hz_page_t **pages, int *kept, int *spare,
                          int *returned) {
  *kept = *spare = *returned = 0;
  for (int i = 0; i < EMPTIED; i++) {
    uintptr_t word = hz_page_owner_word(pages[i]);
    bool retired = word == ((uintptr_t)&owner | HZ_PAGE_RETIRED);
    *kept += retired && pages[i]->emptied && pages[i]->tally->used == 0;
    *spare += retired && !pages[i]->emptied;
    *returned += word == 0;
  }
}

static void fullest_first(void) {
  unsigned cls = hz_sizeclass_of(SIZE);
  CHECK(fill_pages(cls));
  /* Pages 1..5 of 64 blocks (page 0 may share its slice with the header):
   * page 3 gets 58 back, page 1 32 and page 2 6 (the fullest), in that
   * order, so the inbox holds page 2's blocks deepest; pages 4 and 5 get
   * every block back. */
  hz_page_t *p1 = nth_page(1), *p2 = nth_page(2), *p3 = nth_page(3);
  static hz_page_t *emptied[EMPTIED];
  int kept, spare, returned;
  for (int i = 0; i < EMPTIED; i++)
    emptied[i] = nth_page(4 + i);
  CHECK(p3 != NULL);
  if (p3 == NULL) return;
  CHECK(p1->reserved == 64 && p2->reserved == 64 && p3->reserved == 64);
  CHECK(send_home(p2, 6) == 6);
  CHECK(send_home(p1, 32) == 32);
  CHECK(send_home(p3, 58) == 58);
  for (int i = 0; i < EMPTIED; i++)
    CHECK(emptied[i] != NULL && send_home(emptied[i], 64) == 64);
  /* The drain sets the bits; the refill then goes to page 2, then 1. */
  void *first = hz_heap_malloc_small(&owner, SIZE);
  CHECK_MSG(page_of(first) == p2, "the refill took page %p, not the fullest %p",
            (void *)page_of(first), (void *)p2);
  void *next[6];
  for (int i = 0; i < 6; i++)
    next[i] = hz_heap_malloc_small(&owner, SIZE);
  for (int i = 0; i < 5; i++)
    CHECK(page_of(next[i]) == p2);
  CHECK_MSG(page_of(next[5]) == p1,
            "after the fullest page ran out the refill took %p, not %p",
            (void *)page_of(next[5]), (void *)p1);
  /* Emptied pages: the heap keeps them in their class queue (used 0,
   * flagged retired: a free to one is a double free) for the next refills,
   * up to HZ_HEAP_EMPTY_BYTES; the rest went to the spares and their
   * segment at once. */
  count_emptied(emptied, &kept, &spare, &returned);
  int keepable = (int)(HZ_HEAP_EMPTY_BYTES / (64 * SIZE));
  /* (the heap keeps an empty page of the batch above too) */
  CHECK_MSG(kept + spare + returned == EMPTIED && kept <= keepable &&
                kept >= keepable - 2,
            "%d kept (up to %d), %d spare, %d back", kept, keepable, spare,
            returned);
  /* HZ_HEAP_EMPTY_AGE slow paths later, each slow path of the class gives
   * one back (the emptiest, last in line): to the spares, then to their
   * segment. The block taken each time goes back into the bin. */
  for (unsigned i = 0; i < HZ_HEAP_EMPTY_AGE + 2 * EMPTIED; i++) {
    void *p = hz_heap_malloc_small(&owner, SIZE);
    hz_heap_free_block(&owner, page_of(p), p);
  }
  CHECK(owner.bins[cls].top > owner.bins[cls].base);
  count_emptied(emptied, &kept, &spare, &returned);
  CHECK_MSG(kept == 0 && spare <= 4 && spare + returned == EMPTIED,
            "after aging: %d kept, %d spare, %d back", kept, spare, returned);
  hz_heap_trim(&owner); /* the spares go back too */
  for (int i = 0; i < EMPTIED; i++)
    CHECK(hz_page_owner_word(emptied[i]) == 0);
}

/* --- kept pages follow pages in use -------------------------------------- */
enum { BUSY_PAGES = 200, BUSY_BLOCKS = BUSY_PAGES * 64 + 64 };
static _Alignas(64) hz_heap_t busy;
static void *busy_blocks[BUSY_BLOCKS];

/* Send every block of the pages of busy_blocks[from, to) home (the pages
 * they fill up to `to` and no further), then let a slow path drain it. */
static void busy_send_home(int from, int to) {
  for (int i = from; i < to; i++) {
    hz_heap_free_orphan(page_of(busy_blocks[i]), busy_blocks[i]);
    busy_blocks[i] = NULL;
  }
  void *p = hz_heap_malloc_small(&busy, SIZE);
  CHECK(p != NULL);
  hz_heap_free_block(&busy, page_of(p), p);
}

static void kept_follow_use(void) {
  hz_heap_init(&busy);
  int n = 0;
  while (n < BUSY_BLOCKS - 1) {
    busy_blocks[n] = hz_heap_malloc_small(&busy, SIZE);
    CHECK(busy_blocks[n] != NULL);
    if (busy_blocks[n] == NULL) return;
    n++;
  }
  /* The first half of the pages empty while the second half stays in use:
   * 6.4 MiB of empty pages beside 6.4 MiB in use, all kept. */
  int half = n / 2;
  while (half < n &&
         page_of(busy_blocks[half]) == page_of(busy_blocks[half - 1]))
    half++;
  busy_send_home(0, half);
  size_t emptied = (size_t)half * SIZE;
  CHECK_MSG(busy.pages.empty_bytes > HZ_HEAP_EMPTY_BYTES &&
                busy.pages.empty_bytes + 4 * 64 * SIZE >= emptied,
            "%zu bytes of empty pages kept of %zu emptied beside %zu in use",
            busy.pages.empty_bytes, emptied, busy.pages.busy_bytes);
  /* The rest go: the heap keeps no more than HZ_HEAP_EMPTY_BYTES. */
  busy_send_home(half, n);
  CHECK_MSG(busy.pages.empty_bytes <= HZ_HEAP_EMPTY_BYTES,
            "%zu bytes of empty pages kept with %zu in use",
            busy.pages.empty_bytes, busy.pages.busy_bytes);
  hz_heap_trim(&busy);
  CHECK(busy.pages.empty_bytes == 0 && busy.pages.kept_bytes == 0);
}

/* --- whole refills ------------------------------------------------------- */
/* A bin of small blocks that no free came into since its last refill fills
 * whole (the thread only allocates the class); after a free, half. */
static void refill_whole(void) {
  enum { SIZE_WHOLE = 96 };
  hz_bin_t *bin = &owner.bins[hz_sizeclass_of(SIZE_WHOLE)];
  CHECK(hz_bin_count(bin) == 0);
  void *first = hz_heap_malloc_small(&owner, SIZE_WHOLE);
  CHECK_MSG(hz_bin_count(bin) == HZ_BIN_SLOTS - 1,
            "a first refill left %zu blocks", hz_bin_count(bin));
  for (int i = 0; i < HZ_BIN_SLOTS; i++) /* empties it, then refills */
    (void)hz_heap_malloc_small(&owner, SIZE_WHOLE);
  CHECK_MSG(hz_bin_count(bin) == HZ_BIN_SLOTS - 1,
            "a refill after mallocs only left %zu blocks", hz_bin_count(bin));
  hz_heap_free_block(&owner, page_of(first), first); /* into the bin */
  for (int i = 0; i <= HZ_BIN_SLOTS; i++) /* empties it, then refills */
    (void)hz_heap_malloc_small(&owner, SIZE_WHOLE);
  CHECK_MSG(hz_bin_count(bin) == HZ_BIN_SLOTS / 2 - 1,
            "a refill after a free left %zu blocks", hz_bin_count(bin));
}

int main(void) {
  hz_heap_init(&owner);
  hz_heap_init(&other);
  remote_batch();
  fullest_first();
  kept_follow_use();
  refill_whole();
  return check_report("heap_pages");
}
