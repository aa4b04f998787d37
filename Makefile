# Thin wrapper over CMake. `make` builds, `make run` runs the main job on the
# bundled catalogs, `make test` runs the default tests, `make bench` the
# CPU ladder.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build run test test-slow bench clean
all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/pairkit angcorr data/galaxy/data_100k_arcmin.txt data/galaxy/flat_100k_arcmin.txt -o omega.out --png omega.png

test: build
	cd $(BUILD) && ctest --output-on-failure -LE slow -j $(JOBS)

test-slow: build
	cd $(BUILD) && ctest --output-on-failure -L slow

bench: build
	$(BUILD)/pairkit bench angcorr --backend cpu

clean:
	rm -rf $(BUILD)
