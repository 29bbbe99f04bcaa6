"""`python -m sweeper.store show|export|import|prune|decisions`: the autotune store's own
command, at the name its users type. Its code is in sweeper/stores/command.py (export and
import in sweeper/stores/export.py)."""

import sys

from sweeper.stores.command import main

if __name__ == "__main__":
    from sweeper.command_line import closing_pipe_quietly

    sys.exit(closing_pipe_quietly(main)())
