# Two commands set everything up on a fresh machine (see README):
#   make demo   install, then run the default sweep (local, embedded)
#   make test   install, then run the test suite
# Both install into .venv first; re-running is cheap once .venv/.installed exists.
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch and torchvision pinned as a pair: on the CPU machines this project is developed on,
# both lie on local disk, and PyPI's torchvision does not import beside a "+cpu" torch.
TORCH  ?= torch==2.14.1 torchvision==0.29.1

.PHONY: install demo test clean
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e '.[test]'
	touch $@

demo: install
	$(PY) -m sweeper $(ARGS)

test: install
	$(PY) -m pytest -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV)
