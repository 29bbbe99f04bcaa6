"""sweeper: where does the GPU time of a torch.compile'd model go?

The package is split the way data flows (see README "Layout"):
  config / models / validate  what a job is
  trace / categories / breakdown / module_source   pure analysis of captured files
  record                      the versioned result.json schema
  __main__                    the Hydra entry point that launches jobs
The code that touches torch.compile, the GPU and subprocesses lives in tasks/.
"""

__version__ = "0.1.0"
