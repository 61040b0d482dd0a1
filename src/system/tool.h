/* tool: what valgrind's memcheck is told about blocks (debug variant).
 *
 * The debug variant, built where Debian's valgrind headers are present
 * (HZ_VALGRIND), registers every block it hands out as a heap block of
 * the size asked for and unregisters it when it is freed, so memcheck run
 * on a program using it reports use after free, leaks, uninitialised
 * reads and overruns as it does for glibc's malloc. The allocator itself
 * reads and writes freed blocks (links, free marks, fill bytes): it does
 * so with memcheck's error reporting off for the calling thread (`quiet`).
 * Outside valgrind each request is a handful of instructions doing
 * nothing; every other variant compiles them away. */
#ifndef HZ_TOOL_H
#define HZ_TOOL_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

#if HZ_VALGRIND
#include <valgrind/memcheck.h>

HZ_INLINE void hz_tool_quiet(bool on) {
  if (on)
    VALGRIND_DISABLE_ERROR_REPORTING;
  else
    VALGRIND_ENABLE_ERROR_REPORTING;
}

HZ_INLINE void hz_tool_allocated(const void *p, size_t size, bool zeroed) {
  VALGRIND_MALLOCLIKE_BLOCK(p, size, 0, zeroed);
}

HZ_INLINE void hz_tool_freed(const void *p) { VALGRIND_FREELIKE_BLOCK(p, 0); }
#else
HZ_INLINE void hz_tool_quiet(bool on) { (void)on; }
HZ_INLINE void hz_tool_allocated(const void *p, size_t size, bool zeroed) {
  (void)p, (void)size, (void)zeroed;
}
HZ_INLINE void hz_tool_freed(const void *p) { (void)p; }
#endif

#endif
