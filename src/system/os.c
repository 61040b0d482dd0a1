/* os: mmap/munmap/madvise, page size, environment and stderr output, and
 * the per-thread count of locks held (lock.h's: base has no object).
 * Invariant: nothing here allocates through libc, so it is safe to call
 * from inside malloc before any heap exists. */
#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "lock.h"

HZ_TLS unsigned hz_lock_depth;

/* Fault injection (test builds only, HZ_FAULT_INJECTION): the n-th call
 * of mmap, mremap or madvise fails with ENOMEM, and with `from_then_on`
 * every later one too, so tests can walk every failure path. */
#ifdef HZ_FAULT_INJECTION
static _Atomic unsigned long os_fault_calls, os_fault_at;
static _Atomic bool os_fault_sticky;

void hz_os_fault_inject(unsigned long nth, bool from_then_on) {
  atomic_store(&os_fault_calls, 0);
  atomic_store(&os_fault_sticky, from_then_on);
  atomic_store(&os_fault_at, nth);
}

unsigned long hz_os_fault_calls(void) { return atomic_load(&os_fault_calls); }

static bool os_fault(void) {
  unsigned long n = atomic_fetch_add(&os_fault_calls, 1) + 1;
  unsigned long at = atomic_load(&os_fault_at);
  if (at == 0 || n < at || (n > at && !atomic_load(&os_fault_sticky)))
    return false;
  errno = ENOMEM;
  return true;
}
#endif

#if defined(__x86_64__) || defined(__aarch64__)
/* madvise, mprotect and the guard's probes made directly, not through the
 * C library's wrappers: the first call of a wrapper the program never used
 * faults in its page of libc and the pages around it (the kernel's
 * fault-around), 120 KB of a 2 MB program's peak for the guarded sample's
 * calls. 0 (or the result) or -1 with errno, as the wrappers. */
static long os_syscall_result(long ret) {
  if (ret < 0 && ret > -4096) {
    errno = (int)-ret;
    return -1;
  }
  return ret;
}

#if defined(__x86_64__)
static long os_syscall(long nr, long a, long b, long c, long d) {
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return os_syscall_result(ret);
}
#elif defined(__aarch64__)
/* The same on AArch64: the number in x8, the arguments in x0-x3, `svc`. */
static long os_syscall(long nr, long a, long b, long c, long d) {
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  __asm__ volatile("svc #0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3)
                   : "memory");
  return os_syscall_result(x0);
}
#endif
static int os_madvise(void *addr, size_t size, int advice) {
  return (int)os_syscall(SYS_madvise, (long)addr, (long)size, advice, 0);
}
static int os_mprotect(void *addr, size_t size, int prot) {
  return (int)os_syscall(SYS_mprotect, (long)addr, (long)size, prot, 0);
}
#else
#define os_syscall(nr, a, b, c, d) syscall(nr, a, b, c, d)
#define os_madvise                 madvise
#define os_mprotect                mprotect
#endif

#ifdef HZ_FAULT_INJECTION
#define OS_MMAP(...)     (os_fault() ? MAP_FAILED : mmap(__VA_ARGS__))
#define OS_MREMAP(...)   (os_fault() ? MAP_FAILED : mremap(__VA_ARGS__))
#define OS_MADVISE(...)  (os_fault() ? -1 : os_madvise(__VA_ARGS__))
#define OS_MPROTECT(...) (os_fault() ? -1 : os_mprotect(__VA_ARGS__))
#else
#define OS_MMAP     mmap
#define OS_MREMAP   mremap
#define OS_MADVISE  os_madvise
#define OS_MPROTECT os_mprotect
#endif

/* glibc answers from the loader's data: no system call, no allocation. */
size_t hz_os_page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* ---------------------------------------------------------------------------
 * What the box has done (hz_os_counts)
 * ------------------------------------------------------------------------- */
static _Atomic uint64_t mmap_calls, munmap_calls, mremap_calls, madvise_calls;
static _Atomic size_t mapped_bytes, purged_bytes;

#define COUNT(counter, n)                                                      \
  atomic_fetch_add_explicit(&(counter), (n), memory_order_relaxed)
#define READ(counter) atomic_load_explicit(&(counter), memory_order_relaxed)

static void count_mmap(size_t size) {
  COUNT(mmap_calls, 1);
  COUNT(mapped_bytes, size);
}

static void count_mremap(size_t unmapped, size_t mapped) {
  COUNT(mremap_calls, 1);
  COUNT(mapped_bytes, mapped - unmapped); /* wraps, as a subtraction */
}

void hz_os_counts(hz_os_stats_t *out) {
  out->mmap_calls = READ(mmap_calls);
  out->munmap_calls = READ(munmap_calls);
  out->mremap_calls = READ(mremap_calls);
  out->madvise_calls = READ(madvise_calls);
  out->mapped_bytes = READ(mapped_bytes);
  out->purged_bytes = READ(purged_bytes);
}

/* No MAP_NORESERVE: the kernel's overcommit policy judges each mapping,
 * so a request it would refuse glibc fails here too (ENOMEM) instead of
 * being granted and killed later. */
void *hz_os_map(size_t size) {
  int saved = errno;
  void *p = OS_MMAP(NULL, size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  errno = saved;
  if (p == MAP_FAILED) return NULL;
  count_mmap(size);
  return p;
}

void hz_os_unmap(void *addr, size_t size) {
  int saved = errno;
  if (munmap(addr, size) != 0)
    hz_os_message("warning: munmap(%p, %zu) failed", addr, size);
  errno = saved;
  COUNT(munmap_calls, 1);
  COUNT(mapped_bytes, -size);
}

/* Aligned mappings are first asked for at a hint: addresses from a high
 * range (2-4 TiB, its start varied per process) handed out in order, so
 * the kernel usually places them exactly there and no trimming munmap is
 * needed. The hint wraps at the end of the range. */
#define OS_HINT_BASE HZ_HINT_BASE
#define OS_HINT_SPAN HZ_HINT_SIZE
static _Atomic uintptr_t os_hint_next;

static uintptr_t os_hint_take(size_t size, size_t align) {
  uintptr_t next = atomic_load_explicit(&os_hint_next, memory_order_relaxed);
  if (next == 0) {
    uintptr_t seed = (uintptr_t)&next ^ (uintptr_t)hz_os_now_ms() * 2654435761u;
    uintptr_t first = OS_HINT_BASE + ((seed >> 12) % (OS_HINT_SPAN / 2));
    atomic_compare_exchange_strong(&os_hint_next, &next, first);
    next = atomic_load_explicit(&os_hint_next, memory_order_relaxed);
  }
  uintptr_t start, end;
  do {
    start = HZ_ALIGN_UP(next, align);
    end = start + HZ_ALIGN_UP(size, align);
    if (end > OS_HINT_BASE + OS_HINT_SPAN) {
      start = OS_HINT_BASE;
      end = start + HZ_ALIGN_UP(size, align);
    }
  } while (!atomic_compare_exchange_weak(&os_hint_next, &next, end));
  return start;
}

static void *os_map_at_hint(size_t size, size_t align) {
  if (size > OS_HINT_SPAN / 4) return NULL;
  void *hint = (void *)os_hint_take(size, align);
  int saved = errno;
  void *p = OS_MMAP(hint, size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  errno = saved;
  if (p == MAP_FAILED) return NULL;
  if (p == hint) {
    count_mmap(size);
    return p;
  }
  munmap(p, size); /* the kernel chose elsewhere */
  return NULL;
}

/* At the hint, or over-map by `align` and trim both ends so the rest is
 * placed right. */
void *hz_os_map_aligned_at(size_t size, size_t align, size_t offset) {
  if (size + align < size) return NULL;
  if (offset == 0) {
    void *p = os_map_at_hint(size, align);
    if (p != NULL) return p;
  }
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

/* PROT_NONE and MAP_NORESERVE: address space only, charged to nothing
 * until parts of it are made accessible. Where the kernel likes, not in
 * the hint range: the aligned mappings placed there (large blocks) would
 * sit right after it, and under valgrind's memcheck blocks in such a
 * mapping read as unaddressable now and then (the stress test failed in
 * about one run of three; 0 of 20 with the reservation placed apart). */
void *hz_os_reserve(size_t size, size_t align) {
  if (size + align < size) return NULL;
  int saved = errno;
  uint8_t *raw = OS_MMAP(NULL, size + align, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  errno = saved;
  if (raw == MAP_FAILED) return NULL;
  COUNT(mmap_calls, 1);
  uint8_t *start = (uint8_t *)HZ_ALIGN_UP((uintptr_t)raw, align);
  size_t head = (size_t)(start - raw), tail = align - head;
  if (head > 0) munmap(raw, head);
  if (tail > 0) munmap(start + size, tail);
  return start;
}

bool hz_os_commit(void *addr, size_t size) {
  int saved = errno;
  bool ok = OS_MPROTECT(addr, size, PROT_READ | PROT_WRITE) == 0;
  errno = saved;
  if (ok) COUNT(mapped_bytes, size);
  return ok;
}

size_t hz_os_address_limit(void) {
  struct rlimit limit;
  int saved = errno;
  bool known = getrlimit(RLIMIT_AS, &limit) == 0;
  errno = saved;
  if (!known || limit.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  return (size_t)limit.rlim_cur;
}

bool hz_os_discard(void *addr, size_t size, bool lazy) {
  int saved = errno;
  bool zeroed = true;
  if (lazy && OS_MADVISE(addr, size, MADV_FREE) == 0)
    zeroed = false;
  else if (OS_MADVISE(addr, size, MADV_DONTNEED) != 0)
    zeroed = false;
  errno = saved;
  COUNT(madvise_calls, 1);
  COUNT(purged_bytes, size);
  return zeroed;
}

void hz_os_huge_pages(void *addr, size_t size, bool wanted) {
  int saved = errno;
  OS_MADVISE(addr, size, wanted ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  errno = saved;
}

/* Read up to size - 1 bytes of a small file (procfs, sysfs) into buf,
 * NUL-terminated; false if it cannot be read. errno is kept. */
static bool os_read_small_file(const char *path, char *buf, size_t size) {
  int saved = errno;
  ssize_t n = -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    n = read(fd, buf, size - 1);
    close(fd);
  }
  errno = saved;
  if (n <= 0) return false;
  buf[n] = 0;
  return true;
}

void hz_os_protect(void *addr, size_t size, bool accessible) {
  int saved = errno;
  int prot = accessible ? PROT_READ | PROT_WRITE : PROT_NONE;
  if (mprotect(addr, size, prot) != 0)
    hz_os_message("warning: mprotect(%p, %zu) failed", addr, size);
  errno = saved;
}

/* The kernel copies the word for a system call that then refuses its
 * invalid first argument, or fails to copy it (EFAULT): no side effect. */
bool hz_os_readable(const void *p) {
  int saved = errno;
  long r = os_syscall(SYS_rt_sigprocmask, ~0L, (long)p, 0, 8);
  bool ok = !(r == -1 && errno == EFAULT);
  errno = saved;
  return ok;
}

long hz_os_thread_id(void) { return os_syscall(SYS_gettid, 0, 0, 0, 0); }

void hz_os_exit_process(int status) {
  for (;;)
    syscall(SYS_exit_group, status);
}

void hz_os_no_dump(void *addr, size_t size) {
  int saved = errno;
  OS_MADVISE(addr, size, MADV_DONTDUMP);
  errno = saved;
}

bool hz_os_random(void *buf, size_t size) {
  int saved = errno;
  ssize_t n = getrandom(buf, size, GRND_NONBLOCK);
  errno = saved;
  if (n == (ssize_t)size) return true;
  uint64_t mix = (uint64_t)(uintptr_t)buf ^ hz_os_now_ms() ^
                 (uint64_t)(uintptr_t)&mix << 17;
  for (size_t i = 0; i < size; i++) {
    mix = (mix ^ (mix >> 29)) * 0xBF58476D1CE4E5B9u + i;
    ((uint8_t *)buf)[i] = (uint8_t)(mix >> 56);
  }
  return false;
}

size_t hz_os_resident(void *addr, size_t size) {
  unsigned char vec[512];
  size_t page = hz_os_page_size(), pages = size / page;
  if (pages > sizeof vec) return 0;
  int saved = errno;
  int rc = mincore(addr, size, vec);
  errno = saved;
  if (rc != 0) return 0;
  size_t resident = 0;
  for (size_t i = 0; i < pages; i++)
    resident += vec[i] & 1;
  return resident * page;
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

bool hz_os_collapse(void *addr, size_t size) {
  int saved = errno;
  bool ok = OS_MADVISE(addr, size, MADV_COLLAPSE) == 0;
  errno = saved;
  COUNT(madvise_calls, 1);
  return ok;
}

static _Atomic int os_thp_mode = -1;

#ifdef HZ_FAULT_INJECTION
void hz_os_thp_mode_pretend(int mode) { atomic_store(&os_thp_mode, mode); }
#endif

/* Read once: asked per segment mapped and per region that may collapse. */
int hz_os_thp_mode(void) {
  int m = atomic_load_explicit(&os_thp_mode, memory_order_relaxed);
  if (m >= 0) return m;
  char buf[128];
  m = 0;
  if (os_read_small_file("/sys/kernel/mm/transparent_hugepage/enabled", buf,
                         sizeof buf))
    m = strstr(buf, "[always]") != NULL    ? 2
        : strstr(buf, "[madvise]") != NULL ? 1
                                           : 0;
  atomic_store_explicit(&os_thp_mode, m, memory_order_relaxed);
  return m;
}

/* /proc/buddyinfo: a line per zone, "Node 0, zone Normal" and then the
 * free blocks of each order from 0. */
size_t hz_os_free_huge_blocks(void) {
  char buf[2048];
  if (!os_read_small_file("/proc/buddyinfo", buf, sizeof buf)) return 0;
  size_t total = 0;
  for (char *line = buf; line != NULL && *line != 0;) {
    char *end = strchr(line, '\n');
    if (end != NULL) *end = 0;
    char *counts = strstr(line, "zone");
    if (counts != NULL) {
      counts += 4;
      while (*counts == ' ')
        counts++;
      while (*counts != 0 && *counts != ' ')
        counts++; /* the zone's name */
      for (int order = 0; *counts != 0; order++) {
        char *next;
        unsigned long n = strtoul(counts, &next, 10);
        if (next == counts) break;
        if (order >= 9) total += n << (order - 9);
        counts = next;
      }
    }
    line = end != NULL ? end + 1 : NULL;
  }
  return total;
}

bool hz_os_remap_in_place(void *addr, size_t old_size, size_t new_size) {
  int saved = errno;
  void *p = OS_MREMAP(addr, old_size, new_size, 0);
  errno = saved;
  if (p == MAP_FAILED) return false;
  if (new_size >= old_size)
    count_mremap(0, new_size - old_size);
  else
    count_mremap(old_size - new_size, 0);
  return true;
}

bool hz_os_remap_to(void *addr, size_t old_size, size_t new_size, void *to) {
  int saved = errno;
  void *p =
      OS_MREMAP(addr, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, to);
  errno = saved;
  if (p == MAP_FAILED) return false;
  /* The reservation at `to` was counted when mapped; the old range goes. */
  count_mremap(old_size, 0);
  return true;
}

size_t hz_os_physical_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES);
  return pages > 0 ? (size_t)pages * hz_os_page_size() : 0;
}

/* membarrier(2) commands, spelled out: the header is not everywhere. */
#define OS_MEMBARRIER_PRIVATE_EXPEDITED          (1 << 3)
#define OS_MEMBARRIER_REGISTER_PRIVATE_EXPEDITED (1 << 4)

bool hz_os_barrier_all_threads(void) {
  static _Atomic int registered; /* 0 not yet, 1 yes, -1 unavailable */
  int saved = errno;
  int state = atomic_load_explicit(&registered, memory_order_acquire);
  if (state == 0) {
    state = syscall(SYS_membarrier, OS_MEMBARRIER_REGISTER_PRIVATE_EXPEDITED, 0,
                    0) == 0
                ? 1
                : -1;
    atomic_store_explicit(&registered, state, memory_order_release);
  }
  bool ok = state == 1 &&
            syscall(SYS_membarrier, OS_MEMBARRIER_PRIVATE_EXPEDITED, 0, 0) == 0;
  errno = saved;
  return ok;
}

void hz_os_yield(void) { sched_yield(); }

void hz_os_sleep_ms(uint64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  int saved = errno;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  errno = saved;
}

const char *hz_os_getenv(const char *name) { return getenv(name); }

/* Where reports go: stderr, or the copy of it kept at start-up. */
static int os_report_fd = STDERR_FILENO;

/* Programs may close stderr before the exit report is written (coreutils
 * do, to catch write errors); a copy taken at start-up outlives that. The
 * copy sits above the low numbers programs expect to be free, and closes
 * on exec. */
void hz_os_keep_report_fd(void) {
  int saved = errno;
  int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 64);
  if (fd >= 0) os_report_fd = fd;
  errno = saved;
}

int hz_os_report_fd(void) { return os_report_fd; }

static void os_write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    buf += n;
    len -= (size_t)n;
  }
}

static void os_vprint(int fd, const char *prefix, const char *fmt, va_list ap) {
  char buf[512];
  int saved = errno;
  size_t len = 0;
  if (prefix != NULL) len = (size_t)snprintf(buf, sizeof buf, "%s", prefix);
  int n = vsnprintf(buf + len, sizeof buf - len, fmt, ap);
  if (n > 0)
    len += (size_t)n < sizeof buf - len ? (size_t)n : sizeof buf - len - 1;
  if (prefix != NULL && len < sizeof buf - 1) buf[len++] = '\n';
  os_write_all(fd, buf, len);
  errno = saved;
}

void hz_os_message(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  os_vprint(STDERR_FILENO, "hakozuna: ", fmt, ap);
  va_end(ap);
}

void hz_os_print(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  os_vprint(os_report_fd, NULL, fmt, ap);
  va_end(ap);
}

size_t hz_os_rss(void) {
  char buf[128];
  if (!os_read_small_file("/proc/self/statm", buf, sizeof buf)) return 0;
  int saved = errno;
  unsigned long size_pages = 0, rss_pages = 0;
  int fields = sscanf(buf, "%lu %lu", &size_pages, &rss_pages);
  errno = saved;
  return fields == 2 ? rss_pages * hz_os_page_size() : 0;
}

/* The "<key> <n> kB" line of a /proc file, in bytes (0 if not there). */
static size_t os_read_kb_field(const char *path, const char *key) {
  char buf[2048];
  if (!os_read_small_file(path, buf, sizeof buf)) return 0;
  const char *line = strstr(buf, key);
  if (line == NULL) return 0;
  int saved = errno;
  unsigned long kb = 0;
  int fields = sscanf(line + strlen(key), "%lu", &kb);
  errno = saved;
  return fields == 1 ? (size_t)kb << 10 : 0;
}

size_t hz_os_peak_rss(void) {
  return os_read_kb_field("/proc/self/status", "VmHWM:");
}

void hz_os_faults(uint64_t *minor, uint64_t *major) {
  struct rusage usage;
  int saved = errno;
  if (getrusage(RUSAGE_SELF, &usage) != 0) memset(&usage, 0, sizeof usage);
  errno = saved;
  *minor = (uint64_t)usage.ru_minflt;
  *major = (uint64_t)usage.ru_majflt;
}

size_t hz_os_huge_bytes(void) {
  return os_read_kb_field("/proc/self/smaps_rollup", "AnonHugePages:");
}

bool hz_os_write_file(const char *path, const char *text, size_t size) {
  int saved = errno;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  while (ok && size > 0) {
    ssize_t n = write(fd, text, size);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) text += n, size -= (size_t)n;
  }
  if (fd >= 0 && close(fd) != 0) ok = false;
  errno = saved;
  return ok;
}

#ifdef HZ_DEBUG
void hz_debug_fail(const char *expr, const char *file, int line) {
  hz_os_message("internal error: assertion \"%s\" failed at %s:%d", expr, file,
                line);
  abort();
}
#endif

uint64_t hz_os_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t hz_os_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
