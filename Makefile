# Thin wrapper over CMake/CTest. `make` builds build/libhakozuna.so and the
# other products; `make test` builds and runs every test.
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

bench: all

install: all
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
