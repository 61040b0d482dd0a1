/* prof_write: what the profiler writes. Heap profiles in the text format
 * of gperftools' heap profiler (google-pprof reads them: live estimates
 * by stack, then the process's memory map for symbols) and the leak
 * report at exit. Formats by hand and writes with write(2): callable from
 * a signal handler, never allocates. */
#ifndef HZ_PROF_WRITE_H
#define HZ_PROF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prof_store.h"

/* "<prefix>.<program>.<pid>.<sequence>.<why>.heap" into buf. */
void hz_prof_name(char *buf, size_t size, const char *prefix,
                  const char *program, unsigned long pid, unsigned sequence,
                  const char *why);
/* Write the live samples of `store` as a heap profile to path (created or
 * truncated); false with errno on failure. */
bool hz_prof_write_heap(const char *path, const hz_prof_store_t *store);
/* The leak report: the stacks of the samples still live, largest first,
 * on the report stream (os box). */
void hz_prof_report_leaks(const hz_prof_store_t *store, double sample_mean);
/* `title` and the frames of a stack, one line each with the symbol and
 * object dladdr finds, on the report stream: the leak report's form, also
 * the guard box's. */
void hz_prof_report_stack(const char *title, void *const *frames,
                          uint32_t depth);
/* The executable segment of the shared object holding `code`; 0, 0 when
 * that is the main program (a static build). */
void hz_prof_object_range(const void *code, uintptr_t *start, uintptr_t *end);

#endif
