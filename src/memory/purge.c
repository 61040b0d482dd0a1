/* purge: runs the delayed purge of the segment and large boxes when it
 * falls due. Nothing here runs on a malloc/free fast path. */
#include "purge.h"

#include <stdatomic.h>

#include "config.h"
#include "large.h"
#include "os.h"
#include "segment.h"

/* A thread looks at the clock on one slow path in this many. */
#define PURGE_TICK_EVERY 32

static _Atomic bool purge_background;
static HZ_TLS uint32_t tick_countdown;

void hz_purge_run(bool force) {
  uint64_t now = hz_os_now_ms();
  hz_segment_purge(now, force);
  if (force) hz_large_unmap_cached();
  hz_large_purge(now, force);
}

uint64_t hz_purge_next_due(void) {
  uint64_t segments = hz_segment_purge_next();
  uint64_t large = hz_large_purge_next();
  return segments < large ? segments : large;
}

void hz_purge_tick(void) {
  if (tick_countdown-- != 0) return;
  tick_countdown = PURGE_TICK_EVERY;
  if (atomic_load_explicit(&purge_background, memory_order_relaxed)) return;
  uint64_t due = hz_purge_next_due();
  if (due != UINT64_MAX && hz_os_now_ms() >= due) hz_purge_run(false);
}

void hz_purge_large_freed(size_t bytes) {
  hz_purge_tick();
  if (atomic_load_explicit(&purge_background, memory_order_relaxed)) return;
  hz_large_purge_dirty_over(bytes > HZ_LARGE_DIRTY_KEEP ? bytes
                                                        : HZ_LARGE_DIRTY_KEEP);
}

void hz_purge_set_background(bool running) {
  atomic_store_explicit(&purge_background, running, memory_order_relaxed);
}
