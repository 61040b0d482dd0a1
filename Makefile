# Thin wrapper over CMake/CTest. `make` builds build/libhakozuna.so and the
# other products; `make test` builds and runs every test; `make bench`
# compares hakozuna with the peer allocators.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all test bench clean install

all: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/CMakeCache.txt:
	@scripts/install-deps.sh
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

test:
	@scripts/install-deps.sh
	$(MAKE) all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# `make bench` runs the default comparison (about 10 minutes);
# `make bench ARGS="--full"` the whole matrix; ARGS="--help" for the rest.
bench: all
	/usr/bin/python3 bench/harness.py $(ARGS)

install: all
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
