"""sweeper: where does the GPU time of a torch.compile'd model go?

The package follows the data (docs/architecture.md):
  __main__      the command `python -m sweeper`: Hydra composes the sweep, a launcher runs it
  sweep/        what a job is and how a sweep folder is kept: config, checks, the job's
                process, summary.json
  record        the versioned result.json schema, shared by the job, the launchers and
                every reader
  identity, models, inductor_options, host_pause   also shared with the job: what makes
                two jobs one, timm's model names, Inductor's options, the node's pause files
  stores/       the autotune and compile stores, and their exchange with each job
  analysis/     pure analysis of captured files: traces, kernel categories, breakdowns
  reporting/    tables, figures, notes and report.html from a sweep folder's records
  aggregate, history, store   the commands over finished sweeps and the autotune store
The job process itself (torch.compile, the GPU, profiles) is the package tasks/; the Ray
launcher is the Hydra plugin hydra_plugins/sweeper_ray.
"""

__version__ = "0.1.0"
