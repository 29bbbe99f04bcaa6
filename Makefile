# Two commands set everything up on a fresh machine (see README):
#   make demo   install, then run the default sweep (local, embedded)
#   make test   install (Chromium too, for the report's browser test), then run the test suite
#   make test-fast   the tests that need no real compile or sweep of jobs, for development
# Both install into .venv first; re-running is cheap once .venv/.installed exists.
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch and torchvision pinned as a pair: PyPI's torchvision does not import beside
# another torch (a "+cpu" build, say).
TORCH  ?= torch==2.14.1 torchvision==0.29.1

.PHONY: install browser demo test test-fast typecheck clean
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e '.[test]'
	# Holistic Trace Analysis as its maintained successor publishes it (traceinsight, the same
	# `hta` package), without its declared needs: they include jupyterlab, which its trace
	# analysis never imports; what it imports comes with the test extra above
	$(PY) -m pip uninstall -q -y HolisticTraceAnalysis 2>/dev/null || true
	$(PY) -m pip install -q --no-deps traceinsight==0.6.1
	touch $@

demo: install
	$(PY) -m sweeper $(ARGS)

# Chromium from Debian's packages, for tests/test_report.py (as root, or with sudo). Where
# it cannot be installed this says so; that one test then skips, or fails under CI=true.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; else SUDO=none; fi; \
	  if [ "$$SUDO" = none ]; then echo "warning: cannot install chromium (not root, no sudo)" >&2; \
	  else { $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium; } \
	    || echo "warning: installing chromium failed" >&2; fi; }

# Two workers (pytest-xdist), each test file kept on one of them so that a module's
# fixture runs once, the longest files first (tests/conftest.py); beside them, in a
# process of its own, the tests marked `beside`: first those that wait out a stalled or hung
# job's time limit (a core's worth of waiting that the two workers fill), then a few
# self-contained files on the cores that the workers' own waits leave idle; then the tests
# marked `alone` (the host-load reading, confirm's exit after Ctrl-C), with nothing beside them.
# A run that selects no `beside` or no `alone` test exits 5: not a failure here (the
# workers' 5 still is). All three share one folder of the run's stores and C++ kernel
# cache (tests/conftest.py).
test: install browser
	@shared=$$(mktemp -d /tmp/sweeper-tests.XXXXXX); export SWEEPER_TEST_SHARED=$$shared; \
	{ $(PY) -m pytest -q -m beside $(PYTEST_ARGS) > $$shared/beside.log 2>&1 || [ $$? = 5 ]; } & beside=$$!; \
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m "not alone and not beside" $(PYTEST_ARGS); rc=$$?; \
	wait $$beside; src=$$?; echo "--- the tests marked beside (run beside the workers):"; cat $$shared/beside.log; \
	[ $$rc = 0 ] && [ $$src = 0 ] && { $(PY) -m pytest -q -m alone $(PYTEST_ARGS) || [ $$? = 5 ]; }; \
	rc=$$?; rm -rf $$shared; exit $$rc

# For development: the analysis, report, store-order and GPU-lease tests, with no real
# torch.compile and no sweep of jobs (100 s on 2 cores, 170 tests); `make test` runs all.
UNIT_TESTS := $(addprefix tests/test_,breakdown.py categories.py config.py estimate.py findings.py gc_watch.py \
	imports.py kernel_bench.py module_source.py nvml.py order.py record.py summary.py trace.py history.py \
	report_example.py report_headline.py report.py spare_gpus.py gpu_lease.py launch_speed.py bad_summaries.py \
	module_thread.py identity.py host_pause.py cpu_libraries.py attribution.py roofline.py autotune_decisions.py scheduler.py storage.py)
test-fast: install
	$(PY) -m pytest -q -m "not slow" $(UNIT_TESTS) $(PYTEST_ARGS)

# The type check, on the modules listed in pyproject.toml ([tool.mypy]: those that pass it)
typecheck: install
	$(PY) -m mypy

clean:
	rm -rf $(VENV)
