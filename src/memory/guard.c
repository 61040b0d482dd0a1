/* guard: the guarded sample's pool, its slots and their stacks, the
 * canary, and the SIGSEGV handler that reports a fault in the pool (see
 * guard.h). A slot freed where the lock cannot be waited for (a signal
 * handler's free) waits in a list the lock's next holder lines up. */
#define _GNU_SOURCE
#include "guard.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "check.h"
#include "lock.h"
#include "options.h"
#include "os.h"
#include "prof.h"
#include "prof_write.h"

#define GUARD_DEPTH 24

typedef enum {
  SLOT_UNUSED, /* never handed out */
  SLOT_LIVE,
  SLOT_FREEING, /* one thread is freeing it */
  SLOT_FREED,
  SLOT_OPENED /* a fault opened a page beside its live block
               * (HZ_GUARD_RECOVER): the slot is never reused */
} slot_state_t;

/* One slot's block and where it was allocated and freed. */
typedef struct {
  uintptr_t block;
  size_t size;
  uint32_t state;
  pid_t alloc_tid, free_tid;
  uint32_t alloc_depth, free_depth;
  uint32_t waiting_next; /* the next waiting slot's index + 1, 0: none */
  void *alloc_frames[GUARD_DEPTH];
  void *free_frames[GUARD_DEPTH];
} guard_slot_t;

bool hz_guard_active;
uintptr_t hz_guard_base;
size_t hz_guard_span;

static size_t page_size, slot_bytes, stride; /* a slot: data, then a guard */
static size_t max_size, slot_count;
static long mode; /* 0 alternate, 1 against the upper guard, 2 the lower */
static bool recover;
static bool dwarf; /* stacks by backtrace(), not frame pointers */
static double mean_gap;
static guard_slot_t *slots;
/* Free slots in the order they were freed: the oldest is taken first. */
static uint32_t *line, line_head, line_len;
static hz_lock_t guard_lock = HZ_LOCK_INIT(HZ_LOCK_ID_GUARD);
/* Slots freed while the lock could not be waited for (a signal handler's
 * free, whose thread may hold it), waiting to join the line: their indexes
 * + 1, linked by waiting_next, pushed with a CAS and taken whole under the
 * lock. */
static _Atomic uint32_t waiting;
static bool handler_installed;
static struct sigaction previous;    /* the handler before ours */
static uintptr_t own_start, own_end; /* our code, left out of stacks */
static struct { uint64_t allocs, in_use, reports; } counts;
static HZ_TLS bool guard_busy; /* inside the guard: no guarded mallocs */
static HZ_TLS pid_t guard_tid; /* this thread's id, once asked (gettid()
                                * is a system call each time) */

static pid_t thread_id(void) {
  if (guard_tid == 0) guard_tid = (pid_t)hz_os_thread_id();
  return guard_tid;
}

/* ---------------------------------------------------------------------------
 * Slots and their addresses
 * ------------------------------------------------------------------------- */
static uintptr_t slot_data(size_t i) {
  return hz_guard_base + page_size + i * stride;
}

/* The slot whose data pages hold a, or SIZE_MAX (a guard page). */
static size_t slot_at(uintptr_t a) {
  if (a < hz_guard_base + page_size) return SIZE_MAX;
  size_t off = a - hz_guard_base - page_size;
  return off % stride < slot_bytes ? off / stride : SIZE_MAX;
}

static void line_append_locked(size_t i) {
  line[(line_head + line_len) % slot_count] = (uint32_t)i;
  line_len++;
  HZ_SHARED_ADD(counts.in_use, -1);
}

static void waiting_join_locked(void) {
  uint32_t at = atomic_exchange_explicit(&waiting, 0, memory_order_acquire);
  while (at != 0) {
    uint32_t next = slots[at - 1].waiting_next;
    line_append_locked(at - 1);
    at = next;
  }
}

static void slot_wait(size_t i) {
  uint32_t head = atomic_load_explicit(&waiting, memory_order_relaxed);
  do
    slots[i].waiting_next = head;
  while (!atomic_compare_exchange_weak_explicit(
      &waiting, &head, (uint32_t)i + 1, memory_order_release,
      memory_order_relaxed));
}

static bool slot_take(size_t *out) {
  hz_lock(&guard_lock);
  waiting_join_locked();
  bool any = line_len > 0;
  if (any) {
    *out = line[line_head];
    line_head = (uint32_t)((line_head + 1) % slot_count);
    line_len--;
    HZ_SHARED_ADD(counts.in_use, 1);
    HZ_SHARED_ADD(counts.allocs, 1);
  }
  hz_unlock(&guard_lock);
  return any;
}

/* A thread holding one of the allocator's locks (a signal handler's free
 * that interrupted it, maybe with this one held) never waits for it. */
static void slot_put(size_t i) {
  if (hz_lock_depth == 0) {
    hz_lock(&guard_lock);
  } else if (!hz_lock_try(&guard_lock)) {
    slot_wait(i);
    return;
  }
  waiting_join_locked();
  line_append_locked(i);
  hz_unlock(&guard_lock);
}

/* The pages a block of a slot lies on. */
static void block_pages(uintptr_t block, size_t size, uintptr_t *start,
                        uintptr_t *end) {
  *start = block & ~(uintptr_t)(page_size - 1);
  *end = HZ_ALIGN_UP(block + size, page_size);
}

/* The bytes around a block that hold the canary: up to CANARY_SPAN on
 * each side, within its pages (a whole page each time cost 9,000
 * instructions a guarded block, 0.09 a malloc+free pair at 1 in 100,000). */
#define CANARY_SPAN 256

static void canary_range(const guard_slot_t *s, uintptr_t *below,
                         uintptr_t *above) {
  uintptr_t start, end;
  block_pages(s->block, s->size, &start, &end);
  uintptr_t last = s->block + s->size;
  *below = s->block - start > CANARY_SPAN ? s->block - CANARY_SPAN : start;
  *above = end - last > CANARY_SPAN ? last + CANARY_SPAN : end;
}

/* ---------------------------------------------------------------------------
 * The canary: bytes around a block, each a function of its address (a word
 * at a time where whole words fit), all of them even and 0x80 or above: a
 * byte of text, a NUL (the classic one-byte overflow) or a small number
 * written over one always differs from it.
 * ------------------------------------------------------------------------- */
#define CANARY_KEY 0xA5C3E1F00F1E3C5Aull

static uint64_t canary_word(uintptr_t a) {
  uint64_t mixed = CANARY_KEY ^ (a * 0x9E3779B97F4A7C15ull);
  return (mixed | 0x8080808080808080ull) & ~0x0101010101010101ull;
}

static uint8_t canary_byte(uintptr_t a) {
  uintptr_t word = a & ~(uintptr_t)7;
  return (uint8_t)(canary_word(word) >> (8 * (a - word)));
}

static void canary_fill(uintptr_t from, uintptr_t to) {
  uintptr_t a = from;
  for (; a < to && (a & 7) != 0; a++)
    *(uint8_t *)a = canary_byte(a);
  for (; a + 8 <= to; a += 8)
    *(uint64_t *)a = canary_word(a);
  for (; a < to; a++)
    *(uint8_t *)a = canary_byte(a);
}

/* The first spoilt byte in [from, to), or 0. */
static uintptr_t canary_spoilt(uintptr_t from, uintptr_t to) {
  uintptr_t a = from;
  for (; a < to && (a & 7) != 0; a++)
    if (*(const uint8_t *)a != canary_byte(a)) return a;
  for (; a + 8 <= to; a += 8)
    if (*(const uint64_t *)a != canary_word(a)) break;
  for (; a < to; a++)
    if (*(const uint8_t *)a != canary_byte(a)) return a;
  return 0;
}

/* Fill the canary around slot s's block. */
static void canary_arm(const guard_slot_t *s) {
  uintptr_t below, above;
  canary_range(s, &below, &above);
  canary_fill(below, s->block);
  canary_fill(s->block + s->size, above);
}

/* The first spoilt byte of the canary around slot s's block, or 0. */
static uintptr_t canary_check(const guard_slot_t *s) {
  uintptr_t below, above;
  canary_range(s, &below, &above);
  uintptr_t spoilt = canary_spoilt(below, s->block);
  return spoilt != 0 ? spoilt : canary_spoilt(s->block + s->size, above);
}

/* ---------------------------------------------------------------------------
 * Stacks: by frame pointers (no memory of their own), or from the call
 * frame information with backtrace() (HZ_GUARD_DWARF)
 * ------------------------------------------------------------------------- */
/* A frame holds at most this many bytes (a walk past a function built
 * without frame pointers stops at a larger step). */
#define FRAME_MAX 100000

static bool own_code(uintptr_t pc) { return pc >= own_start && pc < own_end; }

/* Return addresses by frame pointers from frame fp up (sp: the stack
 * pointer below it), after `depth` frames already in `frames`: a frame
 * holds its caller's frame pointer and, above it, the return address. The
 * library keeps frame pointers, so its own frames (left out) always lead
 * to its caller; past a function built without them rbp holds something
 * else, and the walk stops at a frame that is not above the last one,
 * not aligned, more than FRAME_MAX above it, or on a page that cannot be
 * read (asked of the kernel when the walk enters a page: a coroutine's
 * stack, or a stray word, may lead anywhere). */
static uint32_t walk(void **frames, uint32_t depth, uintptr_t fp,
                     uintptr_t sp) {
  uintptr_t low = sp, known_page = sp >> 12;
  while (depth < GUARD_DEPTH && fp >= low && fp - low <= FRAME_MAX &&
         (fp & 7) == 0) {
    uintptr_t last = fp + 2 * sizeof(uintptr_t) - 1;
    if ((last >> 12) != known_page) {
      if (!hz_os_readable((const void *)fp) ||
          !hz_os_readable((const void *)(last & ~(uintptr_t)7)))
        break;
      known_page = last >> 12;
    }
    const uintptr_t *frame = (const uintptr_t *)fp;
    uintptr_t pc = frame[1];
    if (pc < 4096) break;
    if (!own_code(pc)) frames[depth++] = (void *)pc;
    low = fp + 2 * sizeof(uintptr_t);
    fp = frame[0];
  }
  return depth;
}

static uint32_t capture_dwarf(void **frames) {
  void *raw[GUARD_DEPTH + 8];
  int n = backtrace(raw, GUARD_DEPTH + 8);
  int first = 0;
  while (first < n && own_code((uintptr_t)raw[first]))
    first++;
  uint32_t depth = 0;
  for (int i = first; i < n && depth < GUARD_DEPTH; i++)
    frames[depth++] = raw[i];
  return depth;
}

/* The calling thread's stack, the guard's frames left out. */
static HZ_NOINLINE uint32_t capture(void **frames) {
  if (dwarf) return capture_dwarf(frames);
  uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
  return walk(frames, 0, fp, fp);
}

/* The faulting instruction's address, frame pointer and stack pointer
 * from the signal's context (the handler's third argument); false where
 * the architecture is not known here. */
static bool context_registers(const void *context, uintptr_t *pc,
                              uintptr_t *fp, uintptr_t *sp) {
  const ucontext_t *uc = context;
#if defined(__x86_64__)
  *pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
  *fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
  *sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
  return true;
#elif defined(__aarch64__)
  *pc = (uintptr_t)uc->uc_mcontext.pc;
  *fp = (uintptr_t)uc->uc_mcontext.regs[29];
  *sp = (uintptr_t)uc->uc_mcontext.sp;
  return true;
#else
  (void)uc, (void)pc, (void)fp, (void)sp;
  return false;
#endif
}

/* The stack of the access that faulted: its instruction, then its callers
 * (context: the handler's third argument). */
static uint32_t capture_access(void **frames, const void *context) {
  uintptr_t pc_at, fp, sp;
  if (!context_registers(context, &pc_at, &fp, &sp)) return capture(frames);
  void *pc = (void *)pc_at;
  if (!dwarf) {
    frames[0] = pc;
    return walk(frames, 1, fp, sp);
  }
  /* backtrace() goes through the signal frame to the access itself. */
  void *raw[GUARD_DEPTH];
  uint32_t depth = capture_dwarf(raw), from = 0;
  while (from < depth && raw[from] != pc)
    from++;
  if (from == depth) from = 0;
  memcpy(frames, raw + from, (depth - from) * sizeof *frames);
  return depth - from;
}

#if defined(__aarch64__)
/* AArch64 keeps the fault's syndrome (ESR_EL1) in a record of the signal
 * frame's reserved area: records of {magic, size} one after another, the
 * last with magic 0. The syndrome's record is "ESR\x01"; 0 if absent. */
#define ESR_RECORD_MAGIC 0x45535201u
static uint64_t fault_syndrome(const ucontext_t *uc) {
  const unsigned char *at = (const unsigned char *)uc->uc_mcontext.__reserved;
  const unsigned char *end = at + sizeof uc->uc_mcontext.__reserved;
  while (at + 16 <= end) {
    uint32_t magic, size;
    memcpy(&magic, at, 4);
    memcpy(&size, at + 4, 4);
    if (magic == 0 || size < 8 || size > (size_t)(end - at)) return 0;
    if (magic == ESR_RECORD_MAGIC) {
      uint64_t esr;
      memcpy(&esr, at + 8, 8);
      return esr;
    }
    at += size;
  }
  return 0;
}
#endif

/* "write" or "read", from what the kernel says of the fault; "access"
 * where it says nothing this code reads. */
static const char *fault_access(const void *context) {
  const ucontext_t *uc = context;
#if defined(__x86_64__)
  return (uc->uc_mcontext.gregs[REG_ERR] & 2) ? "write" : "read";
#elif defined(__aarch64__)
  uint64_t esr = fault_syndrome(uc);
  bool data_abort = (esr >> 26) == 0x24; /* from user space */
  if (!data_abort) return "access";
  return (esr & (1u << 6)) ? "write" : "read"; /* WnR */
#else
  (void)uc;
  return "access";
#endif
}

/* The frames up to the first one no loaded object holds: a walk past a
 * function without frame pointers may have picked up a stray word. */
static uint32_t placed_depth(void *const *frames, uint32_t depth) {
  Dl_info info;
  for (uint32_t i = 0; i < depth; i++)
    if (dladdr((char *)frames[i] - 1, &info) == 0) return i;
  return depth;
}

static void report_stack(const char *title, void *const *frames,
                         uint32_t depth) {
  hz_prof_report_stack(title, frames, placed_depth(frames, depth));
}

/* "hakozuna: guarded block: <kind> (<access>) at <a>, offset <n> of a
 * <size>-byte block at <block>", then the stacks. */
static void report(const char *kind, const char *access, uintptr_t a,
                   const guard_slot_t *s, void *const *here, uint32_t depth) {
  __atomic_add_fetch(&counts.reports, 1, __ATOMIC_RELAXED);
  hz_os_message("guarded block: %s (%s) at %p, offset %lld of a %zu-byte "
                "block at %p",
                kind, access, (void *)a, (long long)(a - s->block), s->size,
                (void *)s->block);
  char title[96];
  if (depth > 0)
    hz_prof_report_stack("  found by this thread at:", here, depth);
  snprintf(title, sizeof title,
           "  allocated by thread %d at:", (int)s->alloc_tid);
  report_stack(title, s->alloc_frames, s->alloc_depth);
  if (s->free_depth > 0) {
    snprintf(title, sizeof title, "  freed by thread %d at:", (int)s->free_tid);
    report_stack(title, s->free_frames, s->free_depth);
  }
}

/* ---------------------------------------------------------------------------
 * The fault handler
 * ------------------------------------------------------------------------- */
/* A fault that is not ours, or ours after its report: what would have
 * happened without us. */
static void chain(int sig, siginfo_t *info, void *context) {
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction != NULL) {
      previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
    return;
  }
  /* The default: the access runs again and kills the process (a signal
   * someone sent is sent again). */
  signal(SIGSEGV, SIG_DFL);
  if (info->si_code <= 0) raise(SIGSEGV);
}

/* The slot a fault at a belongs to: the one whose data pages hold it,
 * else the nearer block beside the guard page. */
static guard_slot_t *fault_slot(uintptr_t a) {
  size_t i = slot_at(a);
  if (i != SIZE_MAX) return &slots[i];
  size_t below = (a - hz_guard_base) / stride; /* the slot after the page */
  guard_slot_t *before = below > 0 ? &slots[below - 1] : NULL;
  guard_slot_t *after = below < slot_count ? &slots[below] : NULL;
  if (before != NULL && before->state == SLOT_UNUSED) before = NULL;
  if (after != NULL && after->state == SLOT_UNUSED) after = NULL;
  if (before == NULL || after == NULL) return before != NULL ? before : after;
  return a - (before->block + before->size) <= after->block - a ? before
                                                                : after;
}

static const char *fault_kind(const guard_slot_t *s, uintptr_t a) {
  if (s->state == SLOT_FREED || s->state == SLOT_FREEING)
    return "use after free";
  return a < s->block ? "heap buffer underflow" : "heap buffer overflow";
}

static void on_fault(int sig, siginfo_t *info, void *context) {
  uintptr_t a = (uintptr_t)info->si_addr;
  guard_slot_t *s =
      hz_guard_holds(info->si_addr) && info->si_code > 0 ? fault_slot(a) : NULL;
  if (s == NULL || s->state == SLOT_UNUSED) {
    chain(sig, info, context);
    return;
  }
  void *here[GUARD_DEPTH];
  guard_busy = true;
  uint32_t depth = capture_access(here, context);
  const char *access = fault_access(context);
  report(fault_kind(s, a), access, a, s, here, depth);
  guard_busy = false;
  if (recover) {
    /* A live block's slot is never reused once its guard page is open; a
     * freed one's page closes again when the slot is next handed out. */
    uint32_t live = SLOT_LIVE;
    __atomic_compare_exchange_n(&s->state, &live, SLOT_OPENED, false,
                                __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    uintptr_t at = a & ~(uintptr_t)(page_size - 1);
    hz_os_protect((void *)at, page_size, true);
    return;
  }
  sigaction(SIGSEGV, &previous, NULL);
  chain(sig, info, context);
}

/* SIGSEGV stays blocked while the handler runs, as the kernel blocks it
 * for the program's own handler: a fault inside the report kills the
 * process rather than entering it again. */
static void install_handler(void) {
  struct sigaction ours;
  memset(&ours, 0, sizeof ours);
  ours.sa_sigaction = on_fault;
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&ours.sa_mask);
  sigaction(SIGSEGV, &ours, &previous);
}

/* ---------------------------------------------------------------------------
 * Start, sampling, malloc and free
 * ------------------------------------------------------------------------- */
void hz_guard_start(void) {
  long sample = hz_option(HZ_OPTION_GUARD_SAMPLE);
  if (sample <= 0 || hz_prof_active) return;
  page_size = hz_os_page_size();
  max_size = (size_t)hz_option(HZ_OPTION_GUARD_MAX);   /* 1 B..256 KiB */
  slot_count = (size_t)hz_option(HZ_OPTION_GUARD_SLOTS); /* 1..4096 */
  slot_bytes = HZ_ALIGN_UP(max_size, page_size);
  stride = slot_bytes + page_size;
  mode = hz_option(HZ_OPTION_GUARD_MODE);
  recover = hz_option_enabled(HZ_OPTION_GUARD_RECOVER);
  dwarf = hz_option_enabled(HZ_OPTION_GUARD_DWARF);
  if (dwarf) {     /* its first call loads libgcc_s, which mallocs: now, not */
    void *warm[2]; /* in a heap's slow path */
    backtrace(warm, 2);
  }
  mean_gap = (double)sample;
  size_t span = page_size + slot_count * stride;
  size_t meta =
      HZ_ALIGN_UP(slot_count * (sizeof *slots + sizeof *line), page_size);
  void *pool = hz_os_reserve(span, page_size);
  slots = pool != NULL ? hz_os_map(meta) : NULL;
  if (slots == NULL) {
    if (pool != NULL) hz_os_unmap(pool, span);
    hz_os_message("HZ_GUARD_SAMPLE: out of address space; the guard is off");
    return;
  }
  hz_os_protect(pool, span, false);
  /* The guard pages' own flags keep every slot's data a mapping of its
   * own: opening and closing it changes its protection in place, where
   * splitting a larger mapping and merging it again cost most of a
   * guarded block's 14 us. */
  for (size_t i = 0; i <= slot_count; i++)
    hz_os_no_dump((char *)pool + i * stride, page_size);
  line = (uint32_t *)(slots + slot_count);
  for (size_t i = 0; i < slot_count; i++)
    line[i] = (uint32_t)i;
  line_len = (uint32_t)slot_count;
  hz_prof_object_range((const void *)&hz_guard_start, &own_start, &own_end);
  hz_guard_base = (uintptr_t)pool;
  hz_guard_span = span;
  hz_guard_active = true;
}

/* -log2(r / 2^53) for r in [1, 2^53], to about 1%: the exponent from the
 * leading zeros, the mantissa's logarithm from a parabola. Not libm's log:
 * its first call brings 200 KB of libm's pages and tables into memory,
 * 10% of a small program's peak. */
static double minus_log2_unit(uint64_t r) {
  int top = 63 - __builtin_clzll(r);
  double t = (double)r / (double)((uint64_t)1 << top) - 1.0; /* [0, 1) */
  return 53.0 - ((double)top + t + 0.346607 * t * (1.0 - t));
}

/* Each malloc is the guard's with chance 1/N: the gap to the next one is
 * geometric, -ln(U) * N for uniform U (N = 1: every malloc). */
uint64_t hz_guard_blocks_to_skip(void) {
  if (mean_gap <= 1.0) return 1;
  uint64_t r = (hz_check_random() >> 11) + 1;
  double gap = minus_log2_unit(r) * 0.6931471805599453 * mean_gap;
  return gap >= 1e18 ? (uint64_t)1e18 : (uint64_t)gap + 1;
}

size_t hz_guard_max_size(void) { return max_size; }

/* Where a block of `size` bytes goes in a slot's data pages: its end
 * against the upper guard, aligned as malloc must (8 bytes below 16, else
 * 16), or its start against the lower one. */
static uintptr_t place(uintptr_t data, size_t size) {
  bool lower = mode == 2 || (mode != 1 && (hz_check_random() & 1) != 0);
  if (lower) return data;
  uintptr_t align = size < 16 ? 8 : 16;
  return (data + slot_bytes - size) & ~(align - 1);
}

/* The first guarded block installs the fault handler. */
static void handler_once(void) {
  if (__atomic_load_n(&handler_installed, __ATOMIC_ACQUIRE)) return;
  hz_lock(&guard_lock);
  if (!handler_installed) {
    install_handler();
    __atomic_store_n(&handler_installed, true, __ATOMIC_RELEASE);
  }
  hz_unlock(&guard_lock);
}

void *hz_guard_malloc(size_t size) {
  size_t i;
  if (guard_busy || size == 0 || size > max_size || !slot_take(&i)) return NULL;
  guard_busy = true; /* backtrace's first call loads libgcc_s: it mallocs */
  guard_slot_t *s = &slots[i];
  uintptr_t block = place(slot_data(i), size), start, end;
  block_pages(block, size, &start, &end);
  hz_os_protect((void *)start, end - start, true);
  s->size = size;
  s->block = block;
  canary_arm(s);
  s->alloc_depth = capture(s->alloc_frames);
  s->alloc_tid = thread_id();
  s->free_depth = 0;
  __atomic_store_n(&s->state, SLOT_LIVE, __ATOMIC_RELEASE);
  handler_once();
  guard_busy = false;
  return (void *)block;
}

void hz_guard_narrow(void *block, void *start, size_t size) {
  guard_slot_t *s = &slots[slot_at((uintptr_t)block)];
  s->block = (uintptr_t)start;
  s->size = size;
  canary_arm(s);
}

/* A free (or a size asked) of p that is no live guarded block: a double
 * free or use after free (with its stacks), or an invalid pointer. */
static void free_invalid(void *p, const guard_slot_t *s, const char *what) {
  if (s != NULL && s->block == (uintptr_t)p && s->state == SLOT_FREED) {
    const char *kind =
        strcmp(what, "invalid free") == 0 ? "double free" : "use after free";
    void *here[GUARD_DEPTH];
    guard_busy = true;
    report(kind, "free", (uintptr_t)p, s, here, capture(here));
    guard_busy = false;
    hz_check_report(kind, p, "a guarded block");
    return;
  }
  hz_check_report(what, p, "not an allocated block");
}

/* A canary spoilt: the block was overrun; reported as found at its free,
 * then the program stops (HZ_GUARD_RECOVER: goes on). */
static void free_spoilt(guard_slot_t *s, uintptr_t spoilt) {
  report(spoilt < s->block ? "heap buffer underflow" : "heap buffer overflow",
         "write, found when the block was freed", spoilt, s, NULL, 0);
  if (!recover) abort();
}

/* Move slot s from `from` to SLOT_FREEING; false if it was not there. */
static bool slot_moves(guard_slot_t *s, uint32_t from) {
  return __atomic_compare_exchange_n(&s->state, &from, SLOT_FREEING, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

void hz_guard_free(void *p) {
  size_t i = slot_at((uintptr_t)p);
  guard_slot_t *s = i != SIZE_MAX ? &slots[i] : NULL;
  bool was_opened = false;
  if (s == NULL || s->block != (uintptr_t)p ||
      !(slot_moves(s, SLOT_LIVE) ||
        (was_opened = slot_moves(s, SLOT_OPENED)))) {
    free_invalid(p, s, "invalid free");
    return;
  }
  guard_busy = true;
  s->free_depth = capture(s->free_frames);
  s->free_tid = thread_id();
  uintptr_t spoilt = canary_check(s);
  if (spoilt != 0) free_spoilt(s, spoilt);
  guard_busy = false;
  uintptr_t start, end;
  block_pages(s->block, s->size, &start, &end);
  hz_os_protect((void *)start, end - start, false);
  hz_os_discard((void *)start, end - start, false);
  __atomic_store_n(&s->state, was_opened ? SLOT_OPENED : SLOT_FREED,
                   __ATOMIC_RELEASE);
  if (!was_opened) slot_put(i);
}

size_t hz_guard_size(const void *p, const char *what) {
  size_t i = slot_at((uintptr_t)p);
  guard_slot_t *s = i != SIZE_MAX ? &slots[i] : NULL;
  uint32_t state =
      s != NULL ? __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) : SLOT_UNUSED;
  if (s != NULL && s->block == (uintptr_t)p &&
      (state == SLOT_LIVE || state == SLOT_OPENED))
    return s->size;
  free_invalid((void *)p, s, what);
  return 0;
}

/* ---------------------------------------------------------------------------
 * Stats and fork
 * ------------------------------------------------------------------------- */
void hz_guard_stats(hz_guard_stats_t *out) {
  out->sample = hz_guard_active ? (uint64_t)mean_gap : 0;
  out->slots = hz_guard_active ? slot_count : 0;
  out->allocs = HZ_SHARED_GET(counts.allocs);
  out->in_use = HZ_SHARED_GET(counts.in_use);
  out->reports = HZ_SHARED_GET(counts.reports);
}

void hz_guard_fork_prepare(void) { hz_lock(&guard_lock); }
void hz_guard_fork_parent(void) { hz_unlock(&guard_lock); }
void hz_guard_fork_child(void) {
  hz_lock_reinit(&guard_lock);
  guard_tid = 0; /* the child's one thread has an id of its own */
}
