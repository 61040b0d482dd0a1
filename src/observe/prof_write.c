/* prof_write: heap profiles and the leak report (see prof_write.h). */
#define _GNU_SOURCE
#include "prof_write.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "os.h"

/* ---------------------------------------------------------------------------
 * Buffered output to a file descriptor, numbers formatted by hand
 * ------------------------------------------------------------------------- */
typedef struct {
  int fd;
  bool ok;
  int error; /* errno of the first failed write */
  size_t len;
  char buf[8192];
} out_t;

static void out_flush(out_t *out) {
  const char *p = out->buf;
  while (out->ok && out->len > 0) {
    ssize_t n = write(out->fd, p, out->len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      out->ok = false;
      out->error = n < 0 ? errno : EIO;
      break;
    }
    p += n;
    out->len -= (size_t)n;
  }
  out->len = 0;
}

static void out_bytes(out_t *out, const char *s, size_t n) {
  while (n > 0) {
    if (out->len == sizeof out->buf) out_flush(out);
    size_t room = sizeof out->buf - out->len;
    size_t take = n < room ? n : room;
    memcpy(out->buf + out->len, s, take);
    out->len += take;
    s += take;
    n -= take;
  }
}

static void out_str(out_t *out, const char *s) { out_bytes(out, s, strlen(s)); }

/* In `base` (10 or 16), right-aligned in `width` columns. */
static void out_number(out_t *out, uint64_t v, unsigned base, int width) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v != 0);
  for (int pad = width - n; pad > 0; pad--)
    out_bytes(out, " ", 1);
  while (n > 0)
    out_bytes(out, &digits[--n], 1);
}

static void out_hex(out_t *out, uintptr_t v) {
  out_str(out, "0x");
  out_number(out, v, 16, 0);
}

static uint64_t rounded(double estimate) {
  return estimate > 0 ? (uint64_t)(estimate + 0.5) : 0;
}

/* ---------------------------------------------------------------------------
 * Heap profiles
 * ------------------------------------------------------------------------- */
void hz_prof_name(char *buf, size_t size, const char *prefix,
                  const char *program, unsigned long pid, unsigned sequence,
                  const char *why) {
  out_t out = {.fd = -1, .ok = true};
  out_str(&out, prefix);
  out_str(&out, ".");
  out_str(&out, program);
  out_str(&out, ".");
  out_number(&out, pid, 10, 0);
  out_str(&out, ".");
  out_number(&out, sequence, 10, 0);
  out_str(&out, ".");
  out_str(&out, why);
  out_str(&out, ".heap");
  size_t n = out.len < size - 1 ? out.len : size - 1;
  memcpy(buf, out.buf, n);
  buf[n] = 0;
}

/* Live estimates per stack, summed over the live records. */
typedef struct {
  double count, bytes;
} live_t;

static size_t live_bytes_of(const hz_prof_store_t *store) {
  return (store->stack_count + 1) * sizeof(live_t);
}

/* The per-stack estimates in a mapping of their own (live_free gives it
 * back), their sum in *total; NULL when out of memory. */
static live_t *live_by_stack(const hz_prof_store_t *store, live_t *total) {
  live_t *live = hz_os_map(live_bytes_of(store));
  *total = (live_t){0, 0};
  if (live == NULL) return NULL;
  for (uint32_t i = 0; i < store->record_used; i++) {
    const hz_prof_record_t *r = &store->records[i];
    if (r->stack == HZ_PROF_NO_STACK) continue;
    live[r->stack].count += r->weight;
    live[r->stack].bytes += r->weight * (double)r->size;
    total->count += r->weight;
    total->bytes += r->weight * (double)r->size;
  }
  return live;
}

static void live_free(const hz_prof_store_t *store, live_t *live) {
  hz_os_unmap(live, live_bytes_of(store));
}

static void out_counts(out_t *out, double n1, double b1, double n2, double b2) {
  out_number(out, rounded(n1), 10, 6);
  out_str(out, ": ");
  out_number(out, rounded(b1), 10, 8);
  out_str(out, " [");
  out_number(out, rounded(n2), 10, 6);
  out_str(out, ": ");
  out_number(out, rounded(b2), 10, 8);
  out_str(out, "] @");
}

/* Return addresses point after the call; the first is moved back into it
 * here, google-pprof moves the others. */
static void out_stack(out_t *out, const hz_prof_stack_t *s) {
  for (uint32_t f = 0; f < s->depth; f++) {
    out_str(out, " ");
    out_hex(out, (uintptr_t)s->frames[f] - (f == 0));
  }
  out_str(out, "\n");
}

static void out_maps(out_t *out) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char chunk[4096];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out_bytes(out, chunk, (size_t)n);
  }
  close(fd);
}

bool hz_prof_write_heap(const char *path, const hz_prof_store_t *store) {
  live_t total;
  live_t *live = live_by_stack(store, &total);
  if (live == NULL) return false;
  double alloc_count = 0, alloc_bytes = 0;
  for (uint32_t i = 0; i < store->stack_count; i++) {
    alloc_count += store->stacks[i].alloc_count;
    alloc_bytes += store->stacks[i].alloc_bytes;
  }
  out_t out = {.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644),
               .ok = true};
  if (out.fd < 0) {
    int err = errno;
    live_free(store, live);
    errno = err;
    return false;
  }
  out_str(&out, "heap profile: ");
  out_counts(&out, total.count, total.bytes, alloc_count, alloc_bytes);
  out_str(&out, " heapprofile\n");
  for (uint32_t i = 0; i < store->stack_count; i++) {
    const hz_prof_stack_t *s = &store->stacks[i];
    out_counts(&out, live[i].count, live[i].bytes, s->alloc_count,
               s->alloc_bytes);
    out_stack(&out, s);
  }
  out_str(&out, "\nMAPPED_LIBRARIES:\n");
  out_maps(&out);
  out_flush(&out);
  live_free(store, live);
  bool ok = out.ok && close(out.fd) == 0;
  if (!out.ok) errno = out.error;
  return ok;
}

/* ---------------------------------------------------------------------------
 * The leak report
 * ------------------------------------------------------------------------- */
#define LEAK_STACKS_SHOWN 20

static void report_frame(out_t *out, uint32_t n, void *frame) {
  out_str(out, "    #");
  out_number(out, n, 10, 0);
  out_str(out, " ");
  out_hex(out, (uintptr_t)frame);
  Dl_info info;
  void *at = (char *)frame - 1; /* inside the call */
  if (dladdr(at, &info) != 0) {
    if (info.dli_sname != NULL) {
      out_str(out, " ");
      out_str(out, info.dli_sname);
      out_str(out, "+");
      out_hex(out, (uintptr_t)at - (uintptr_t)info.dli_saddr);
    }
    if (info.dli_fname != NULL && info.dli_fname[0] != 0) {
      out_str(out, " (");
      out_str(out, info.dli_fname);
      out_str(out, "+");
      out_hex(out, (uintptr_t)at - (uintptr_t)info.dli_fbase);
      out_str(out, ")");
    }
  }
  out_str(out, "\n");
}

void hz_prof_report_stack(const char *title, void *const *frames,
                          uint32_t depth) {
  out_t out = {.fd = hz_os_report_fd(), .ok = true};
  out_str(&out, "hakozuna: ");
  out_str(&out, title);
  out_str(&out, "\n");
  for (uint32_t f = 0; f < depth; f++)
    report_frame(&out, f, frames[f]);
  if (depth == 0) out_str(&out, "    (no stack)\n");
  out_flush(&out);
}

/* The stack with the most live bytes not yet shown, or UINT32_MAX. */
static uint32_t next_largest(const hz_prof_store_t *store, live_t *live) {
  uint32_t best = UINT32_MAX;
  for (uint32_t i = 0; i < store->stack_count; i++)
    if (live[i].count > 0 &&
        (best == UINT32_MAX || live[i].bytes > live[best].bytes))
      best = i;
  return best;
}

void hz_prof_report_leaks(const hz_prof_store_t *store, double sample_mean) {
  live_t total;
  live_t *live = live_by_stack(store, &total);
  if (live == NULL) return;
  out_t out = {.fd = hz_os_report_fd(), .ok = true};
  out_str(&out, "hakozuna: leak report: about ");
  out_number(&out, rounded(total.bytes), 10, 0);
  out_str(&out, " bytes in ");
  out_number(&out, rounded(total.count), 10, 0);
  out_str(&out, " blocks still live at exit (estimated from samples every ");
  out_number(&out, rounded(sample_mean), 10, 0);
  out_str(&out, " bytes on average)\n");
  for (int shown = 0; shown < LEAK_STACKS_SHOWN; shown++) {
    uint32_t i = next_largest(store, live);
    if (i == UINT32_MAX) break;
    out_str(&out, "hakozuna: about ");
    out_number(&out, rounded(live[i].bytes), 10, 0);
    out_str(&out, " bytes in ");
    out_number(&out, rounded(live[i].count), 10, 0);
    out_str(&out, " blocks allocated at:\n");
    const hz_prof_stack_t *s = &store->stacks[i];
    for (uint32_t f = 0; f < s->depth; f++)
      report_frame(&out, f, s->frames[f]);
    live[i].count = 0; /* shown */
  }
  out_flush(&out);
  live_free(store, live);
}

/* ---------------------------------------------------------------------------
 * Where the allocator's own code lies
 * ------------------------------------------------------------------------- */
typedef struct {
  uintptr_t code, start, end;
} object_search_t;

static int find_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  object_search_t *search = arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    uintptr_t end = start + ph->p_memsz;
    if (search->code < start || search->code >= end) continue;
    /* The main program (first, unnamed): a static build, keep none. */
    bool main_program = info->dlpi_name == NULL || info->dlpi_name[0] == 0;
    if (!main_program) search->start = start, search->end = end;
    return 1;
  }
  return 0;
}

void hz_prof_object_range(const void *code, uintptr_t *start, uintptr_t *end) {
  object_search_t search = {(uintptr_t)code, 0, 0};
  dl_iterate_phdr(find_object, &search);
  *start = search.start;
  *end = search.end;
}
