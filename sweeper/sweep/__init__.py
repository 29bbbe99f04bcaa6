"""The sweep: what to run and how a sweep folder is kept.

The job configuration (config: every key, typed, with its default), its checks before any
job starts (validate; the model names and Inductor's options it checks are
sweeper/models.py and sweeper/inductor_options.py, which the job reads too), each job in a fresh process that always
comes back with a record (job_process), and the sweep folder's summary.json and closing
report (summary). Both launchers use these: Hydra's basic one through sweeper.__main__,
and the Ray launcher in hydra_plugins/sweeper_ray.
"""
