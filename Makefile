# Two commands set everything up on a fresh machine (see README):
#   make demo   install, then run the default sweep (local, embedded)
#   make test   install (Chromium too, for the report's browser test), then run the test suite
# Both install into .venv first; re-running is cheap once .venv/.installed exists.
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch and torchvision pinned as a pair: PyPI's torchvision does not import beside
# another torch (a "+cpu" build, say).
TORCH  ?= torch==2.14.1 torchvision==0.29.1

.PHONY: install browser demo test clean
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e '.[test]'
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

test: install browser
	$(PY) -m pytest -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV)
