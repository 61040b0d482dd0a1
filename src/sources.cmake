# The library's sources, one folder per layer (docs/DESIGN.md): a layer's
# boxes call only boxes of their own layer or of the layers listed before
# it. Sources include each other's headers by name, so every layer folder
# is on the include path. Read by the build (CMakeLists.txt) and the fuzzers
# (tests/fuzz/CMakeLists.txt); paths are relative to src/.
set(HZ_LAYERS system policy observe memory threads surface)
set(HZ_CORE_FILES
  system/os.c system/options.c
  policy/sizeclass.c policy/check.c policy/route.c
  observe/stats.c observe/prof.c observe/prof_store.c observe/prof_write.c
  memory/page.c memory/arena.c memory/segment_map.c memory/segment.c
  memory/large.c memory/purge.c memory/guard.c
  threads/remote.c threads/heap_owner.c threads/heap_sample.c
  threads/heap_pages.c threads/heap_spill.c threads/heap_drain.c
  threads/heap_lend.c threads/class_heap.c threads/heap.c threads/heap_free.c
  threads/heap_collect.c threads/cpu_cache.c threads/depot.c
  threads/decision.c threads/ladder.c threads/thread_pool.c threads/thread.c
  surface/api.c surface/cxx.c)
set(HZ_OVERRIDE_FILES surface/override.c)
