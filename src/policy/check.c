/* check: the secret, the reports, and the debug canary (see check.h). */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "os.h"
#include "sizeclass.h"

hz_check_secret_t hz_check_secret;
bool hz_check_zero_on_free;

void hz_check_init(void) {
  hz_os_random(&hz_check_secret, sizeof hz_check_secret);
  hz_check_secret.mark |= 1; /* a mark is never a block's own address */
  hz_check_zero_on_free = hz_option_enabled(HZ_OPTION_ZERO_ON_FREE);
  if (!HZ_SECURE && hz_check_zero_on_free)
    hz_os_message("warning: HZ_ZERO_ON_FREE needs libhakozuna-secure.so or "
                  "libhakozuna-debug.so; ignored");
}

static void check_stop(void) {
  if (HZ_SECURE) abort();
}

void hz_check_fail(const char *what, const void *p, unsigned cls, size_t size) {
  if (cls == 0)
    hz_os_message("error: %s of %p (large block of %zu bytes)", what, p, size);
  else
    hz_os_message("error: %s of %p (size class %u: %zu-byte blocks)", what, p,
                  cls,
                  size != 0 ? size : hz_sizeclass_block_size((uint8_t)cls));
  check_stop();
}

void hz_check_report(const char *what, const void *p, const char *context) {
  hz_os_message("error: %s of %p (%s)", what, p, context);
  check_stop();
}

bool hz_check_freeing(void *block, unsigned cls, size_t size) {
  if (hz_check_is_marked(block)) {
    hz_check_fail("double free", block, cls, size);
    return false;
  }
  if (HZ_SECURE && hz_check_zero_on_free) memset(block, 0, size);
  hz_check_set_mark(block);
  return true;
}

void *hz_check_unmarked(void *block, unsigned cls) {
  hz_check_fail("write after free", block, cls, 0);
  return block;
}

static HZ_TLS uint64_t check_random_state;

/* xorshift64*, seeded per thread from the secret. */
uint64_t hz_check_random(void) {
  uint64_t x = check_random_state;
  if (x == 0) x = (hz_check_secret.link ^ (uintptr_t)&check_random_state) | 1;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  check_random_state = x;
  return x * 0x2545F4914F6CDD1Du;
}

/* ---------------------------------------------------------------------------
 * Debug canary
 * ------------------------------------------------------------------------- */
static uint64_t canary_size_word(const void *p, size_t n) {
  return (uint64_t)n ^ ((uintptr_t)p * 0x9E3779B97F4A7C15u) ^
         hz_check_secret.mark;
}

static uint8_t *canary_tail(const void *p, size_t room) {
  return (uint8_t *)p + room - sizeof(uint64_t);
}

void hz_check_canary_arm(void *p, size_t n, size_t room, bool zeroed) {
  uint8_t *tail = canary_tail(p, room);
  if (!zeroed) memset(p, HZ_CHECK_FRESH, n);
  memset((uint8_t *)p + n, HZ_CHECK_CANARY_B,
         (size_t)(tail - (uint8_t *)p) - n);
  uint64_t word = canary_size_word(p, n);
  memcpy(tail, &word, sizeof word);
}

size_t hz_check_canary_verify(const void *p, size_t room, unsigned cls) {
  const uint8_t *tail = canary_tail(p, room);
  uint64_t word;
  memcpy(&word, tail, sizeof word);
  size_t n = (size_t)(word ^ canary_size_word(p, 0));
  size_t canary = room - sizeof word - (n < room ? n : 0);
  if (n + sizeof word > room || canary < HZ_CHECK_EXTRA - sizeof word) {
    hz_os_message("error: heap overflow past the end of %p (its %zu bytes of "
                  "room overrun, size word lost; size class %u)",
                  p, room, cls);
    abort();
  }
  const uint8_t *from = (const uint8_t *)p + n;
  size_t reach = 0; /* one past the last overwritten canary byte */
  for (size_t i = 0; i < canary; i++)
    if (from[i] != HZ_CHECK_CANARY_B) reach = i + 1;
  if (reach != 0) {
    hz_os_message("error: heap overflow of %p (block of %zu bytes overrun by "
                  "%zu bytes; size class %u)",
                  p, n, reach, cls);
    abort();
  }
  return n;
}

void hz_check_fill_freed(void *p, size_t room) {
  memset(p, HZ_CHECK_FREED, room);
}
