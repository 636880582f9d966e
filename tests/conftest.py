"""Set-up shared by every test."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

_LOGGERS = ("stepview", "py.warnings")


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """Undo what a run of ``stepview.cli.main`` does to logging, after each test.

    A run sends the ``stepview`` loggers to its log file and stops them propagating (so
    nothing is printed over the TUI). Left so, a later test's ``caplog`` (on the root
    logger) would see nothing of stepview's, depending on which tests ran before it.
    """
    saved = [
        (log, list(log.handlers), log.propagate, log.level)
        for log in map(logging.getLogger, _LOGGERS)
    ]
    raise_exceptions = logging.raiseExceptions
    yield
    for log, handlers, propagate, level in saved:
        for handler in log.handlers:
            if handler not in handlers:
                log.removeHandler(handler)
                handler.close()
        log.propagate, log.level = propagate, level
    logging.raiseExceptions = raise_exceptions
    logging.captureWarnings(False)
