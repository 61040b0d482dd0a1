# Thin wrapper over CMake/CTest. `make` builds build/libhakozuna.so and the
# other products with nothing but a C compiler, make and CMake; `make test`
# installs what the tests need (scripts/install-deps.sh), configures again so
# the build sees it, builds and runs every test; `make bench` installs the
# peer allocators (bench/install-peers.sh) and compares hakozuna with them.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all test bench fuzz soak clean install deb

all: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

test:
	@scripts/install-deps.sh
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	cd $(BUILD) && GLIBC_TUNABLES=glibc.pthread.rseq=0 ctest --output-on-failure -j $(JOBS) -E '$(NO_RSEQ_SKIP)'

# The suite once more without glibc's rseq registration (the per-CPU front
# end's fallback), less the tests that do not depend on it: packaging,
# benchmarks, documentation, the fuzzers and the sanitizer and valgrind
# runs (which never see rseq).
NO_RSEQ_SKIP = ^(fuzz|setup|deb|install|apps|bench|programs|prof|docs|layers|boxes|placement|static|wrapper|man|memcheck|stress.valgrind|.*tsan)

# `make bench` runs the default comparison (about 12 minutes);
# `make bench ARGS="--full"` the whole matrix; ARGS="--help" for the rest.
bench: all
	/usr/bin/python3 bench/harness.py $(ARGS)

# `make fuzz` runs the fuzzers for FUZZ_SECONDS (the api fuzzer; options a
# quarter of it); FUZZ_KEEP=1 merges what they found into the corpus.
FUZZ_SECONDS ?= 600
fuzz:
	@scripts/install-deps.sh
	tests/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS)

# `make soak`: SOAK_MINUTES (30) of server rounds and cross-thread hand-offs
# in one process; RSS must level off and every block come back.
SOAK_MINUTES ?= 30
soak: all
	/usr/bin/python3 bench/soak.py --minutes $(SOAK_MINUTES)

install: all
	cmake --install $(BUILD)

# `make deb`: $(BUILD)/package/hakozuna_<version>_amd64.deb (CPack).
deb: all
	cd $(BUILD) && cpack -G DEB

clean:
	rm -rf $(BUILD)
