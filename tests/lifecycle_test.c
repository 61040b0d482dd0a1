/* Thread and process lifecycle corners: a thread whose first allocator call
 * is free; allocation inside pthread key destructors that run after the
 * allocator's own (forcing the thread to take a heap again while exiting);
 * allocation in atexit handlers and in ELF destructors; many threads at
 * once. Everything allocated is verified before it is freed. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "test_alloc.h"

#define ROUNDS 200
#define MANY_THREADS 1000

static pthread_key_t late_key;
static _Atomic int destructor_allocs;

static char *filled(size_t size, int seed) {
  char *p = t_malloc(size);
  if (p != NULL) memset(p, seed, size);
  return p;
}

static int verify_and_free(char *p, size_t size, int seed) {
  int ok = p != NULL;
  for (size_t i = 0; ok && i < size; i++) ok = p[i] == (char)seed;
  t_free(p);
  return ok;
}

/* Runs after the allocator's own key destructor (keys run in creation
 * order and this key is made after the first allocation). */
static void late_destructor(void *value) {
  uintptr_t round = (uintptr_t)value;
  char *p = filled(100 + round % 3000, 0x33);
  char *q = filled(300000, 0x44); /* large block too */
  if (verify_and_free(p, 100 + round % 3000, 0x33) &&
      verify_and_free(q, 300000, 0x44))
    atomic_fetch_add(&destructor_allocs, 1);
  if (round % 2 == 0) /* ask for one more destructor round */
    pthread_setspecific(late_key, (void *)(round + 1));
}

static void *first_call_free(void *arg) {
  t_free(arg); /* this thread has not allocated anything yet */
  char *p = filled(64, 0x11);
  int ok = verify_and_free(p, 64, 0x11);
  return (void *)(uintptr_t)ok;
}

static void *exiting_allocator(void *arg) {
  char *p = filled(48, 0x22);
  pthread_setspecific(late_key, arg);
  return (void *)(uintptr_t)verify_and_free(p, 48, 0x22);
}

static pthread_barrier_t many_barrier; /* all alive at once */
static void *many_worker(void *arg) {
  char *p = filled(32 + (uintptr_t)arg % 512, 0x55);
  pthread_barrier_wait(&many_barrier);
  return (void *)(uintptr_t)verify_and_free(p, 32 + (uintptr_t)arg % 512, 0x55);
}

static void *atexit_block;
static void at_exit_handler(void) {
  char *p = filled(5000, 0x66);
  if (!verify_and_free(p, 5000, 0x66) || !verify_and_free(atexit_block, 777, 0x77)) {
    fprintf(stderr, "lifecycle: allocation in atexit handler failed\n");
    _exit(3);
  }
}

__attribute__((destructor)) static void elf_destructor(void) {
  char *p = filled(40000, 0x12);
  if (!verify_and_free(p, 40000, 0x12)) {
    fprintf(stderr, "lifecycle: allocation in ELF destructor failed\n");
    _exit(4);
  }
}

int main(void) {
  t_free(t_malloc(1)); /* the allocator's key exists before late_key */
  CHECK(pthread_key_create(&late_key, late_destructor) == 0);

  for (int i = 0; i < ROUNDS; i++) {
    pthread_t t;
    void *ok = NULL;
    pthread_create(&t, NULL, first_call_free, t_malloc(16 + i));
    pthread_join(t, &ok);
    CHECK(ok == (void *)1);
    pthread_create(&t, NULL, exiting_allocator, (void *)(uintptr_t)(i * 2));
    pthread_join(t, &ok);
    CHECK(ok == (void *)1);
  }
  CHECK_MSG(atomic_load(&destructor_allocs) >= ROUNDS,
            "%d destructor allocations", atomic_load(&destructor_allocs));

  static pthread_t many[MANY_THREADS];
  int created = 0;
  pthread_barrier_init(&many_barrier, NULL, MANY_THREADS + 1);
  for (int i = 0; i < MANY_THREADS; i++) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    if (pthread_create(&many[i], &attr, many_worker, (void *)(uintptr_t)i) == 0)
      created++;
    pthread_attr_destroy(&attr);
  }
  CHECK_MSG(created == MANY_THREADS, "created %d threads", created);
  if (created == MANY_THREADS) pthread_barrier_wait(&many_barrier);
  for (int i = 0; i < created; i++) {
    void *ok = NULL;
    pthread_join(many[i], &ok);
    CHECK(ok == (void *)1);
  }

  atexit_block = filled(777, 0x77);
  CHECK(atexit(at_exit_handler) == 0);
  return check_report("lifecycle");
}
