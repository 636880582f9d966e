"""Where stepview writes when the command line does not say: the log and the results file.

Both live in the user's directories (``platformdirs``), not in the working directory: a run
started anywhere must not litter it, and the files are easy to find again.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def default_log_path() -> Path:
    """stepview's and vLLM's log, one file reused across runs."""
    from platformdirs import user_log_dir

    return Path(user_log_dir("stepview")) / "stepview.log"


def default_results_path() -> Path:
    """A new results file per TUI run, named by the time it started and the process id."""
    from platformdirs import user_data_dir

    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(user_data_dir("stepview")) / "results" / f"results-{stamp}-{os.getpid()}.jsonl"
