"""Where stepview writes its log by default.

The default lives in the user's directories (``platformdirs``), not in the working directory:
a run started anywhere must not litter it, and the file is easy to find again. The outputs'
files are the output registry's (:mod:`stepview.outputs`: their defaults, and the check of
named ones before anything starts).
"""

from __future__ import annotations

from pathlib import Path


def default_log_path() -> Path:
    """stepview's and vLLM's log, one file reused across runs."""
    from platformdirs import user_log_dir

    return Path(user_log_dir("stepview")) / "stepview.log"
