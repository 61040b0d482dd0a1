/* cxx: every C++ operator new/delete, written in C under their mangled
 * names so the library needs no C++ runtime. new calls the installed
 * new-handler on failure and throws std::bad_alloc through libstdc++,
 * both reached as weak symbols: present whenever a C++ program is running
 * (with no libstdc++ loaded nobody calls operator new, and a failure then
 * aborts with a message). This file is built with -fexceptions so the
 * exception can unwind through it.
 *
 * nothrow new must return NULL even when the new-handler throws, which C
 * cannot catch. So when an allocation fails and a handler is installed,
 * the nothrow forms hand over to libstdc++'s own nothrow operator, which
 * wraps our throwing operator in try/catch. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include "api.h"
#include "config.h"
#include "hakozuna.h"
#include "os.h"

typedef void (*new_handler_t)(void);
extern new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

static void *cxx_alloc(size_t size, size_t alignment) {
  return alignment <= HZ_MIN_ALIGN ? hz_malloc(size)
                                   : hz_api_memalign(alignment, size);
}

void *hz_api_cxx_new(size_t size, size_t alignment, int nothrow) {
  for (;;) {
    void *p = cxx_alloc(size, alignment);
    if (HZ_LIKELY(p != NULL)) return p;
    new_handler_t handler = NULL;
    if (_ZSt15get_new_handlerv != NULL) handler = _ZSt15get_new_handlerv();
    if (handler != NULL) {
      handler();
      continue;
    }
    if (nothrow) return NULL;
    if (_ZSt17__throw_bad_allocv != NULL) _ZSt17__throw_bad_allocv();
    hz_os_message("error: operator new(%zu) failed and std::bad_alloc "
                  "cannot be thrown",
                  size);
    abort();
  }
}

static int cxx_handler_installed(void) {
  return _ZSt15get_new_handlerv != NULL && _ZSt15get_new_handlerv() != NULL;
}

typedef struct nothrow_s nothrow_t;
typedef void *(*nothrow_new_t)(size_t, const nothrow_t *);
typedef void *(*nothrow_aligned_new_t)(size_t, size_t, const nothrow_t *);

/* libstdc++'s definition of `symbol`, never our own. */
static void *cxx_next(const char *symbol, void *ours) {
  void *next = dlsym(RTLD_NEXT, symbol);
  return next == ours ? NULL : next;
}

static void *cxx_nothrow(const char *symbol, void *ours, size_t n,
                         const nothrow_t *t) {
  void *p = hz_malloc(n);
  if (HZ_LIKELY(p != NULL) || !cxx_handler_installed()) return p;
  nothrow_new_t next = (nothrow_new_t)cxx_next(symbol, ours);
  return next != NULL ? next(n, t) : hz_api_cxx_new(n, 0, 1);
}

static void *cxx_nothrow_aligned(const char *symbol, void *ours, size_t n,
                                 size_t a, const nothrow_t *t) {
  void *p = cxx_alloc(n, a);
  if (HZ_LIKELY(p != NULL) || !cxx_handler_installed()) return p;
  nothrow_aligned_new_t next = (nothrow_aligned_new_t)cxx_next(symbol, ours);
  return next != NULL ? next(n, a, t) : hz_api_cxx_new(n, a, 1);
}

#define NEW(name, ...)    HZ_EXPORT void *name(__VA_ARGS__)
#define DELETE(name, ...) HZ_EXPORT void name(__VA_ARGS__)

NEW(_Znwm, size_t n) { return hz_api_cxx_new(n, 0, 0); }
NEW(_Znam, size_t n) { return hz_api_cxx_new(n, 0, 0); }
NEW(_ZnwmRKSt9nothrow_t, size_t n, const nothrow_t *t) {
  return cxx_nothrow("_ZnwmRKSt9nothrow_t", (void *)_ZnwmRKSt9nothrow_t, n, t);
}
NEW(_ZnamRKSt9nothrow_t, size_t n, const nothrow_t *t) {
  return cxx_nothrow("_ZnamRKSt9nothrow_t", (void *)_ZnamRKSt9nothrow_t, n, t);
}
NEW(_ZnwmSt11align_val_t, size_t n, size_t a) {
  return hz_api_cxx_new(n, a, 0);
}
NEW(_ZnamSt11align_val_t, size_t n, size_t a) {
  return hz_api_cxx_new(n, a, 0);
}
NEW(_ZnwmSt11align_val_tRKSt9nothrow_t, size_t n, size_t a,
    const nothrow_t *t) {
  return cxx_nothrow_aligned("_ZnwmSt11align_val_tRKSt9nothrow_t",
                             (void *)_ZnwmSt11align_val_tRKSt9nothrow_t, n, a,
                             t);
}
NEW(_ZnamSt11align_val_tRKSt9nothrow_t, size_t n, size_t a,
    const nothrow_t *t) {
  return cxx_nothrow_aligned("_ZnamSt11align_val_tRKSt9nothrow_t",
                             (void *)_ZnamSt11align_val_tRKSt9nothrow_t, n, a,
                             t);
}

DELETE(_ZdlPv, void *p) { hz_free(p); }
DELETE(_ZdaPv, void *p) { hz_free(p); }
DELETE(_ZdlPvm, void *p, size_t n) { hz_free_sized(p, n); }
DELETE(_ZdaPvm, void *p, size_t n) { hz_free_sized(p, n); }
DELETE(_ZdlPvRKSt9nothrow_t, void *p, const nothrow_t *t) {
  (void)t;
  hz_free(p);
}
DELETE(_ZdaPvRKSt9nothrow_t, void *p, const nothrow_t *t) {
  (void)t;
  hz_free(p);
}
DELETE(_ZdlPvSt11align_val_t, void *p, size_t a) {
  hz_free_aligned_sized(p, a, 0);
}
DELETE(_ZdaPvSt11align_val_t, void *p, size_t a) {
  hz_free_aligned_sized(p, a, 0);
}
DELETE(_ZdlPvmSt11align_val_t, void *p, size_t n, size_t a) {
  hz_free_aligned_sized(p, a, n);
}
DELETE(_ZdaPvmSt11align_val_t, void *p, size_t n, size_t a) {
  hz_free_aligned_sized(p, a, n);
}
DELETE(_ZdlPvSt11align_val_tRKSt9nothrow_t, void *p, size_t a,
       const nothrow_t *t) {
  (void)t;
  hz_free_aligned_sized(p, a, 0);
}
DELETE(_ZdaPvSt11align_val_tRKSt9nothrow_t, void *p, size_t a,
       const nothrow_t *t) {
  (void)t;
  hz_free_aligned_sized(p, a, 0);
}
