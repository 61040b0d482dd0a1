/* prof: the sampling heap profiler (HZ_PROF=1). It decides which
 * allocations are sampled, records each sampled block with its stack until
 * it is freed, and writes what is live as a heap profile (gperftools'
 * text format, which google-pprof reads) at exit, on SIGUSR2, after
 * growth, and on request, plus a leak report at exit.
 *
 * Sampling is a Poisson process over allocated bytes with a mean gap of
 * HZ_PROF_SAMPLE bytes. Small blocks are sampled per size class: the heap
 * box asks how many blocks of a class to hand out before the next sample
 * (the gap in blocks is geometric, so each block is sampled with the same
 * chance 1 - exp(-block/mean)), and counts them with the bin's allocation
 * counter it keeps anyway. Large blocks are sampled here, against a
 * thread's byte countdown. Each sample stands for 1/chance blocks.
 *
 * The profiler never allocates through malloc: its tables live in mappings
 * of their own, stacks come from libunwind (loaded with dlopen only when
 * profiling is on), and a thread that is already inside the profiler (an
 * unwinder that allocates, a signal handler) is not sampled again. */
#ifndef HZ_PROF_H
#define HZ_PROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Set once at start-up, when HZ_PROF=1 and the unwinder loaded. */
extern bool hz_prof_active;

/* At process start (a constructor, after the first heap exists): read the
 * HZ_PROF options, load the unwinder, install the SIGUSR2 handler. */
void hz_prof_start(void);

/* Blocks of `block_size` bytes to hand out before the next sampled one:
 * 1 means the very next. Only while active. */
uint64_t hz_prof_blocks_to_skip(size_t block_size);

/* Block `block` (of `unit` bytes, `size` asked for) on `page` was chosen:
 * record it with the caller's stack. False if it could not be recorded
 * (this thread is inside the profiler, or out of memory for the tables). */
bool hz_prof_record(void *block, size_t size, size_t unit, const void *page);

/* A large block of `size` bytes was handed out: sample it or not. */
void hz_prof_large(void *block, size_t size);

/* Block `block` on `page` (NULL: a large block) is being freed: forget it
 * if it was sampled. False when `page` holds no sampled block now (true
 * when it may). Blocks that were not sampled cost no lock: counting
 * filters, read without it, tell most of them apart. */
bool hz_prof_forget(const void *block, const void *page);

/* Without the lock: false when `block` is certainly not a sampled one,
 * or `page` certainly holds none (the page's owner only). */
bool hz_prof_may_be_sampled(const void *block);
bool hz_prof_page_may_hold(const void *page);

/* A sampled large block moved or changed size (realloc). */
void hz_prof_moved(const void *from, void *to, size_t size);

/* fork: the first prepare step waits for every unwinding thread and keeps
 * new ones out (an unwinding thread may allocate, so before any of the
 * allocator's locks); the parent and the child open the way again. */
/* The process ends: the final profile, and the leak report if asked (a
 * destructor; _exit calls it itself). */
void hz_prof_exit_report(void);
void hz_prof_fork_wait_unwinds(void);
void hz_prof_fork_prepare(void);
void hz_prof_fork_parent(void);
void hz_prof_fork_child(void);

#endif
