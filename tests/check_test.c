/* check: encoded links round-trip, and a small change of a stored link
 * (one or two flipped bits, or an added |d| < 2^20) decodes to a pointer at
 * least 2^40 away from the real one, under many secrets and holders: far
 * outside the page, so the page's range check always catches it. A plain
 * XOR key fails this at once (a flipped bit moves the link by that bit). */
#include <stdint.h>
#include <stdlib.h>

#include "../src/policy/check.h" /* the box under test */
#include "check.h"               /* CHECK, check_report (tests/check.h) */

#define FAR ((uint64_t)1 << 40)

static uint64_t rng_state = 0x853C49E6748FEA9Bu;

static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static uint64_t distance(uint64_t a, uint64_t b) {
  return a > b ? a - b : b - a;
}

/* A block address as a heap hands them out: below 2^47, 16-aligned. */
static void *some_block(void) {
  return (void *)(uintptr_t)((rng() & (((uint64_t)1 << 47) - 1)) & ~15u);
}

/* How far `stored` changed by XOR `flip` and by adding `add` decodes. */
static uint64_t moved_by_flip(const void *holder, uintptr_t stored,
                              uintptr_t flip) {
  uintptr_t real = (uintptr_t)hz_check_decode(holder, (void *)stored);
  return distance(real,
                  (uintptr_t)hz_check_decode(holder, (void *)(stored ^ flip)));
}

static uint64_t moved_by_add(const void *holder, uintptr_t stored,
                             uintptr_t add) {
  uintptr_t real = (uintptr_t)hz_check_decode(holder, (void *)stored);
  return distance(real,
                  (uintptr_t)hz_check_decode(holder, (void *)(stored + add)));
}

static void check_one_link(void) {
  void *holder = some_block();
  void *next = rng() % 8 == 0 ? NULL : some_block();
  uintptr_t stored = (uintptr_t)hz_check_encode(holder, next);
  CHECK(hz_check_decode(holder, (void *)stored) == next);
  uint64_t nearest = UINT64_MAX;
  for (int i = 0; i < 64; i++)
    for (int j = i; j < 64; j++) {
      uintptr_t flip = ((uintptr_t)1 << i) | ((uintptr_t)1 << j);
      uint64_t d = moved_by_flip(holder, stored, flip);
      if (d < nearest) nearest = d;
    }
  for (int k = 0; k < 64; k++) {
    uintptr_t add = 1 + (uintptr_t)(rng() % ((1u << 20) - 1));
    uint64_t d = moved_by_add(holder, stored, rng() & 1 ? add : -add);
    if (d < nearest) nearest = d;
  }
  CHECK_MSG(nearest >= FAR,
            "a small change of link %p (holder %p) decodes %llu bytes away",
            next, holder, (unsigned long long)nearest);
}

/* Every additive change below 2^20, both signs, for one link. */
static void check_every_small_add(void) {
  void *holder = some_block();
  uintptr_t stored = (uintptr_t)hz_check_encode(holder, some_block());
  uint64_t nearest = UINT64_MAX;
  for (uintptr_t d = 1; d < ((uintptr_t)1 << 20); d++) {
    uint64_t up = moved_by_add(holder, stored, d);
    uint64_t down = moved_by_add(holder, stored, -d);
    if (up < nearest) nearest = up;
    if (down < nearest) nearest = down;
  }
  CHECK_MSG(nearest >= FAR, "an added change decodes %llu bytes away",
            (unsigned long long)nearest);
}

int main(void) {
  for (int secret = 0; secret < 16; secret++) {
    hz_check_secret.link = (uintptr_t)rng();
    for (int link = 0; link < 64; link++)
      check_one_link();
  }
  check_every_small_add();
  return check_report("check");
}
