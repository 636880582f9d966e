"""stepview's log file: its own messages and the libraries' warnings, never the terminal.

The TUI owns the terminal, and headless output is read by programs, so anything logged goes
to one file (vLLM's loggers are routed there too, by ``engine.environment``, in the same
format).
"""

from __future__ import annotations

import logging
from pathlib import Path

from stepview.engine.own.environment import LOG_FORMAT


def setup_logging(path: Path) -> None:
    """Send the ``stepview`` loggers and Python's warnings to ``path`` (raises ``OSError``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    log = logging.getLogger("stepview")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    # A log write that fails (disk full) must not print a "Logging error" traceback over the
    # TUI or into headless output; the run goes on without that line.
    logging.raiseExceptions = False
    # Libraries' warnings (torch, vLLM) belong in the log, not over the TUI or headless output.
    logging.captureWarnings(True)
    warnings_log = logging.getLogger("py.warnings")
    warnings_log.addHandler(handler)
    warnings_log.propagate = False
