"""The two stores a sweep keeps on the driver's machine, and how their entries travel with
each job:

  autotune_store   max-autotune timings and Triton kernel configs, shared by every job of a
                   torch version and GPU (also `python -m sweeper.store`)
  compile_store    each job's compile (PyTorch's cache blob), for a later run of that job
  exchange         the launchers' side: a job's seeds out (seeds), its entries back
                   (bring_back)

The job's side (tasks/job_stores.py) imports the two stores' file formats from here; this
package imports nothing of tasks/ (tests/test_imports.py).
"""
