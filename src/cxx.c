/* cxx: every C++ operator new/delete, written in C under their mangled
 * names so the library needs no C++ runtime. new calls the installed
 * new-handler on failure and throws std::bad_alloc through libstdc++,
 * both reached as weak symbols: present whenever a C++ program is running
 * (with no libstdc++ loaded nobody calls operator new, and a failure then
 * aborts with a message). This file is built with -fexceptions so the
 * exception can unwind through it. */
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
                  "cannot be thrown", size);
    abort();
  }
}

#define NEW(name, ...) HZ_EXPORT void *name(__VA_ARGS__)
#define DELETE(name, ...) HZ_EXPORT void name(__VA_ARGS__)
typedef struct nothrow_s nothrow_t;

NEW(_Znwm, size_t n) { return hz_api_cxx_new(n, 0, 0); }
NEW(_Znam, size_t n) { return hz_api_cxx_new(n, 0, 0); }
NEW(_ZnwmRKSt9nothrow_t, size_t n, const nothrow_t *t) {
  (void)t;
  return hz_api_cxx_new(n, 0, 1);
}
NEW(_ZnamRKSt9nothrow_t, size_t n, const nothrow_t *t) {
  (void)t;
  return hz_api_cxx_new(n, 0, 1);
}
NEW(_ZnwmSt11align_val_t, size_t n, size_t a) { return hz_api_cxx_new(n, a, 0); }
NEW(_ZnamSt11align_val_t, size_t n, size_t a) { return hz_api_cxx_new(n, a, 0); }
NEW(_ZnwmSt11align_val_tRKSt9nothrow_t, size_t n, size_t a, const nothrow_t *t) {
  (void)t;
  return hz_api_cxx_new(n, a, 1);
}
NEW(_ZnamSt11align_val_tRKSt9nothrow_t, size_t n, size_t a, const nothrow_t *t) {
  (void)t;
  return hz_api_cxx_new(n, a, 1);
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
DELETE(_ZdlPvSt11align_val_t, void *p, size_t a) { hz_free_aligned_sized(p, a, 0); }
DELETE(_ZdaPvSt11align_val_t, void *p, size_t a) { hz_free_aligned_sized(p, a, 0); }
DELETE(_ZdlPvmSt11align_val_t, void *p, size_t n, size_t a) {
  hz_free_aligned_sized(p, a, n);
}
DELETE(_ZdaPvmSt11align_val_t, void *p, size_t n, size_t a) {
  hz_free_aligned_sized(p, a, n);
}
DELETE(_ZdlPvSt11align_val_tRKSt9nothrow_t, void *p, size_t a, const nothrow_t *t) {
  (void)t;
  hz_free_aligned_sized(p, a, 0);
}
DELETE(_ZdaPvSt11align_val_tRKSt9nothrow_t, void *p, size_t a, const nothrow_t *t) {
  (void)t;
  hz_free_aligned_sized(p, a, 0);
}
