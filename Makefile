# dreamddp: `make demo` and `make test` are the two set-up commands (README.md).
SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)
PY := /usr/bin/python3
DEB_PACKAGES := cmake g++ make libgtest-dev libbenchmark-dev zlib1g-dev libgloo-dev libopenmpi-dev openmpi-bin \
  libhdf5-dev hdf5-tools libboost-program-options-dev libdnnl-dev ocl-icd-opencl-dev opencl-headers nlohmann-json3-dev dataset-fashion-mnist \
  iproute2 redis-server python3-h5py python3-matplotlib fortunes libsimgrid-dev
PEER_PACKAGES := python3-torch python3-torchvision libopenblas0-pthread

.PHONY: deps deps-peer build test test-sanitize demo figures clean

deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then echo "installing:" $$missing; \
	  (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "deps: all Debian packages present"; fi

# The peer with OpenBLAS (what PyTorch's CPU matmul uses on Debian when it is installed), not netlib's reference BLAS.
deps-peer:
	@missing=$$(for p in $(PEER_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

# The ten slowest tests are printed at the end of each run, pass or fail, so that drift in the suite's time shows.
test: build
	cd $(BUILD) && rc=0; ctest --output-on-failure -j$(JOBS) --timeout 600 --output-junit junit.xml || rc=$$?; \
	  $(PY) $(CURDIR)/tests/slowest.py junit.xml 10; exit $$rc

test-sanitize: deps
	cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DDREAMDDP_SANITIZE=ON -DDREAMDDP_NO_CUDA=ON >/dev/null
	cmake --build build-san -j$(JOBS)
	cd build-san && rc=0; ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -L 'unit|sanitize' -j$(JOBS) --timeout 900 --output-junit junit.xml || rc=$$?; \
	  $(PY) $(CURDIR)/tests/slowest.py junit.xml 10; exit $$rc

demo: build
	bash experiments/demo.sh

RUNS ?= runs
figures:
	$(PY) analysis/make_figures.py $(RUNS)

clean:
	rm -rf $(BUILD) build-san
