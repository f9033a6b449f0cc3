# dreamddp: `make demo` and `make test` are the two set-up commands (README.md).
SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)
PY := /usr/bin/python3
DEB_PACKAGES := cmake g++ make libgtest-dev libbenchmark-dev zlib1g-dev libgloo-dev libopenmpi-dev openmpi-bin \
  libhdf5-dev hdf5-tools libboost-program-options-dev libdnnl-dev ocl-icd-opencl-dev opencl-headers nlohmann-json3-dev dataset-fashion-mnist \
  iproute2 redis-server python3-h5py python3-matplotlib fortunes libsimgrid-dev \
  python3-torch python3-torchvision libopenblas0-pthread \
  openssh-server openssh-client slurmd slurmctld slurm-client munge
# The checks against PyTorch in `make test` use Debian's torch (above); the benchmark peers get a current one.
PEER_PACKAGES := python3-torch python3-torchvision libopenblas0-pthread

.PHONY: deps deps-peer build test test-sanitize demo figures clean

deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then echo "installing:" $$missing; \
	  (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "deps: all Debian packages present"; fi

# The peer (peers/README.md): a pinned current PyTorch, torchvision and torchft from PyPI in the project's virtual
# environment .venv-peer, which the experiment scripts prefer; Debian's python3-torch with OpenBLAS (not netlib's
# reference BLAS) stays the fallback, and is what the cross-check tests use. A no-op when the pins are installed.
# Prints the install time and size; where PyPI cannot be reached it says so and installs only the Debian peer.
PEER_VENV := .venv-peer
deps-peer:
	@missing=$$(for p in $(PEER_PACKAGES) python3-venv; do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; fi
	@if cmp -s peers/requirements.txt $(PEER_VENV)/.installed; then \
	  echo "deps-peer: $(PEER_VENV) has peers/requirements.txt ($$($(PEER_VENV)/bin/python -c 'import torch; print("torch", torch.__version__)'))"; exit 0; fi; \
	rm -rf $(PEER_VENV).tmp; t0=$$(date +%s); \
	if $(PY) -m venv $(PEER_VENV).tmp && $(PEER_VENV).tmp/bin/pip install -q --disable-pip-version-check --progress-bar off \
	     -r peers/requirements.txt; then \
	  rm -rf $(PEER_VENV) && mv $(PEER_VENV).tmp $(PEER_VENV) && cp peers/requirements.txt $(PEER_VENV)/.installed; \
	  echo "deps-peer: installed $(PEER_VENV) in $$(( $$(date +%s) - t0 )) s, $$(du -sh $(PEER_VENV) | cut -f1):" \
	    "$$($(PEER_VENV)/bin/python -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)')"; \
	else \
	  rm -rf $(PEER_VENV).tmp; \
	  echo "deps-peer: PyPI could not be reached or refused the pins: no $(PEER_VENV); the peer runs on Debian's torch" \
	    "$$($(PY) -c 'import torch; print(torch.__version__)'), and every results file says so" >&2; \
	fi

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
