"""The private torch and Inductor APIs this project leans on, in one package.

None of these is a public API; each can change between torch releases. They were run on
torch 2.11.0 (CUDA 13.0, the GPU machine) and 2.14.1 (CPU, the Makefile's), which is why
pyproject.toml asks for torch>=2.11. When a torch upgrade breaks one, this package is where
to look first; the tests that exercise each are named beside it.

- probes.py: read-only: options, timers, counters, the system hash, classes to wrap;
- compile_cache.py: the portable compile blob, kernel and wrapper files, the worker pool;
- kernel_configs.py: sweeper's own use of Inductor's kernel-config files (tuned configs
  read and written back, the index by kernel code);
- benchmark_lease.py: Inductor's benchmarks under the GPU's lease (a context manager that
  patches, restores and counts);
- tuned_launch.py: kernels launched with an earlier run's tuned config (the same);
- inductor_config.py: Inductor's options by their dotted names, read and set (the user's
  `inductor` options, checked on the driver, set in the job).

No module outside this package reaches a private torch API (tests/test_imports.py checks
the source): the job's modules (tasks/) and the driver's (sweeper/inductor_options.py) call
these. The package is the job's and the driver's both: it imports nothing of either side.
"""

TESTED_ON = ("2.11.0", "2.14.1")
