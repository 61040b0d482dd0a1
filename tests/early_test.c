/* Start-up under LD_PRELOAD: a constructor that runs before main calls
 * dlsym, dlopen, fopen and creates a thread, all of which allocate inside
 * libc before (or while) the allocator initialises. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int early_ok;

static void *early_thread(void *arg) {
  char *p = malloc(1000);
  if (p == NULL) return NULL;
  memset(p, 7, 1000);
  free(arg);
  return p;
}

__attribute__((constructor(101))) static void early(void) {
  void *sym = dlsym(RTLD_NEXT, "printf");
  void *lib = dlopen("libm.so.6", RTLD_NOW);
  void *cosine = lib != NULL ? dlsym(lib, "cos") : NULL;
  FILE *f = fopen("/proc/self/maps", "r");
  char line[256];
  int lines = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    lines++;
  if (f != NULL) fclose(f);
  pthread_t t;
  void *result = NULL;
  int created = pthread_create(&t, NULL, early_thread, malloc(10)) == 0;
  if (created) pthread_join(t, &result);
  early_ok = sym != NULL && cosine != NULL && lines > 0 && result != NULL;
  free(result);
  if (lib != NULL) dlclose(lib);
}

int main(void) {
  CHECK(early_ok);
  void *lib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib != NULL) {
    CHECK(dlsym(lib, "zlibVersion") != NULL);
    dlclose(lib);
  }
  char *bogus =
      dlopen("/nonexistent/libnothing.so", RTLD_NOW) ? NULL : dlerror();
  CHECK(bogus != NULL && strstr(bogus, "nonexistent") != NULL);
  return check_report("early");
}
