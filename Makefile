# Thin wrapper over CMake/CTest. `make` builds build/libhakozuna.so and the
# other products with nothing but a C compiler, make and CMake; `make test`
# installs what the tests need (scripts/install-deps.sh), configures again so
# the build sees it, builds and runs every test; `make bench` installs the
# peer allocators (bench/install-peers.sh) and compares hakozuna with them.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all test bench fuzz soak clean install deb arm64 test-arm64 \
	test-arm64-user

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

# arm64 (docs/usage.md, "Platforms"): `make arm64` cross-builds into
# $(ARM64_BUILD) with Debian's aarch64 toolchain; `make test-arm64-user`
# runs the tests that need no rseq under qemu-user (CI runs it);
# `make test-arm64` runs the suite, both passes, in an arm64 Debian
# machine under qemu-system-aarch64 (its image built once into
# $(ARM64_VM)), where the per-CPU caches are on; ARM64_PASSES=first or
# second runs one of the two.
ARM64_BUILD ?= $(BUILD)/arm64
ARM64_VM ?= $(BUILD)/arm64-vm
arm64:
	@scripts/install-deps.sh arm64
	cmake -S . -B $(ARM64_BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
	cmake --build $(ARM64_BUILD) -j $(JOBS)

# In the machine: what needs a compiler, clang, valgrind, the benchmark
# programs' peers or a package manager does not run there (the x86-64
# suite covers it, and none of it depends on the architecture's code):
# the builds and packaging (setup, static, install, deb), the fuzzers,
# valgrind's runs and callgrind's x86-64 instruction budget (hot_pair),
# the apps and real-program runs (their programs and data), the benchmark
# harness, and the checks of the sources and objects (docs, layers,
# boxes, placement: host tools read the cross-built objects the same).
ARM64_SKIP = ^(fuzz|setup|deb|install|static|apps|programs|bench.harness|bench.hot_pair|memcheck|stress.valgrind|docs|layers|boxes|placement)
test-arm64: arm64
	@scripts/install-deps.sh arm64-vm
	scripts/arm64-vm.sh image $(ARM64_VM)
	scripts/arm64-vm.sh run $(ARM64_VM) $(CURDIR) scripts/arm64-tests.sh \
	  $(ARM64_BUILD) '$(ARM64_SKIP)' '$(NO_RSEQ_SKIP)' $(ARM64_PASSES)

# Under qemu-user (no rseq: the per-thread path and the depots) the unit
# tests and the behaviour tests that neither measure RSS (qemu's own
# memory is in it) nor start themselves again (a child started by path
# runs without the emulator), and not last_thread (under qemu-user a
# process whose main thread called pthread_exit outlives its last thread).
# About 4 minutes on 2 cores, with the cross-build.
ARM64_USER_TESTS = ^(unit\..*|(stress|api_edge|early|invalid_free|return_order)\.(linked|preload))$$
test-arm64-user: arm64
	cd $(ARM64_BUILD) && ctest --output-on-failure -j $(JOBS) \
	  -R '$(ARM64_USER_TESTS)' -E '$(ARM64_SKIP)'

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
