/* os: mmap/munmap/madvise, page size, environment and stderr output.
 * Invariant: nothing here allocates through libc, so it is safe to call
 * from inside malloc before any heap exists. */
#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "stats.h"

/* glibc answers from the loader's data: no system call, no allocation. */
size_t hz_os_page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

void *hz_os_map(size_t size) {
  int saved = errno;
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  errno = saved;
  if (p == MAP_FAILED) return NULL;
  hz_stats_count_mmap(size);
  return p;
}

void hz_os_unmap(void *addr, size_t size) {
  int saved = errno;
  if (munmap(addr, size) != 0)
    hz_os_message("warning: munmap(%p, %zu) failed", addr, size);
  errno = saved;
  hz_stats_count_munmap(size);
}

/* Over-map by `align` and trim both ends so the rest is placed right. */
void *hz_os_map_aligned_at(size_t size, size_t align, size_t offset) {
  if (size + align < size) return NULL;
  uint8_t *raw = hz_os_map(size + align);
  if (raw == NULL) return NULL;
  uintptr_t target = HZ_ALIGN_UP((uintptr_t)raw + offset, align);
  uint8_t *start = (uint8_t *)(target - offset);
  size_t head = (size_t)(start - raw);
  size_t tail = align - head;
  if (head > 0) hz_os_unmap(raw, head);
  if (tail > 0) hz_os_unmap(start + size, tail);
  return start;
}

void *hz_os_map_aligned(size_t size, size_t align) {
  return hz_os_map_aligned_at(size, align, 0);
}

void hz_os_discard(void *addr, size_t size) {
  int saved = errno;
  madvise(addr, size, MADV_DONTNEED);
  errno = saved;
  hz_stats_count_madvise(size);
}

const char *hz_os_getenv(const char *name) { return getenv(name); }

static void os_write_all(const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(STDERR_FILENO, buf, len);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    buf += n;
    len -= (size_t)n;
  }
}

static void os_vprint(const char *prefix, const char *fmt, va_list ap) {
  char buf[512];
  int saved = errno;
  size_t len = 0;
  if (prefix != NULL) len = (size_t)snprintf(buf, sizeof buf, "%s", prefix);
  int n = vsnprintf(buf + len, sizeof buf - len, fmt, ap);
  if (n > 0)
    len += (size_t)n < sizeof buf - len ? (size_t)n : sizeof buf - len - 1;
  if (prefix != NULL && len < sizeof buf - 1) buf[len++] = '\n';
  os_write_all(buf, len);
  errno = saved;
}

void hz_os_message(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  os_vprint("hakozuna: ", fmt, ap);
  va_end(ap);
}

void hz_os_print(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  os_vprint(NULL, fmt, ap);
  va_end(ap);
}

size_t hz_os_rss(void) {
  int saved = errno;
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  size_t rss = 0;
  if (fd >= 0) {
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) {
      buf[n] = 0;
      unsigned long size_pages = 0, rss_pages = 0;
      if (sscanf(buf, "%lu %lu", &size_pages, &rss_pages) == 2)
        rss = rss_pages * hz_os_page_size();
    }
  }
  errno = saved;
  return rss;
}

#ifdef HZ_DEBUG
void hz_debug_fail(const char *expr, const char *file, int line) {
  hz_os_message("internal error: assertion \"%s\" failed at %s:%d", expr, file,
                line);
  abort();
}
#endif

uint64_t hz_os_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
