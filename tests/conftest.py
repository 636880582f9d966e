"""Set-up shared by every test, and the fixtures of the tests that run real vLLM.

A test that uses an engine fixture (:data:`tests.vllm_engines.ENGINE_FIXTURES`) is marked
``engine`` here, so ``-m "not engine"`` (the quick loop) never starts vLLM in-process; tests
that start it in a child process (``stepview --headless``) are marked by hand, and the quick
loop runs with vLLM and torch hidden, so a forgotten mark fails loudly instead of slowly.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.watch.fake_metrics import fake_metrics
from tests.scheduling import (
    HEAVY,
    HEAVY_TIMEOUT_S,
    SERVERS,
    group_of,
    order_units,
    pytest_xdist_make_scheduler,
    whole_module_marked,
)
from tests.servers import (
    SERVER_FIXTURES,
    locked_server,
    plain_server,
    plugged_server,
    server_pool,
    tight_server,
)
from tests.vllm_engines import ENGINE_FIXTURES, demo_model_path, engines

__all__ = [  # fixtures and hooks, found by pytest here
    "demo_model_path",
    "engines",
    "fake_metrics",
    "locked_server",
    "plain_server",
    "plugged_server",
    "pytest_xdist_make_scheduler",
    "server_pool",
    "tight_server",
]

_LOGGERS = ("stepview", "py.warnings")

# pytest-xdist's workers export COLUMNS=80 and LINES=24, which a user's shell does not: every
# process a test starts would inherit them, and Textual takes them over the terminal's real
# size (a stepview in tmux then never follows a resize). Serial and parallel runs must match.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


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


@pytest.fixture(autouse=True)
def _runner_priority_kept(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Keep a run of ``stepview.cli.main`` in this process from lowering the test runner's
    CPU priority, and fail the test that does it anyway.

    Attached, stepview lowers its own priority (``--nice``, 10 by default) before it has
    opened its outputs; a test that runs an attach that then stops (a flight folder that
    cannot be made) left the whole runner at nice 10: every later test, and the servers it
    started, ran niced, and its watches at 19 - starved beside two busy loops, a fresh-clone
    run failed. What lowering does is tested in a child process (test_attach_flags.py).
    """
    from stepview.launch import compose

    monkeypatch.setattr(compose, "lower_priority", lambda nice: None)
    before = os.nice(0)
    yield
    assert os.nice(0) == before, "this test lowered the test runner's CPU priority"


def pytest_configure(config: pytest.Config) -> None:
    # Deprecations inside vLLM/torch at import time; nothing this project can act on.
    config.addinivalue_line("filterwarnings", "ignore:.*torch.distributed.reduce_op:FutureWarning")
    config.addinivalue_line("filterwarnings", "ignore:.*torch.jit.script_method:DeprecationWarning")


# The quick loop's hider (tests/hide_vllm/sitecustomize.py), when this run has one.
_HIDER = next((f for f in sys.meta_path if type(f).__name__ == "_Hidden"), None)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the quick loop, a test module marked ``engine`` as a whole is not even imported: it
    may import vLLM at its top (the plug-in's tests do), which the hider refuses, and every
    one of its tests would be deselected anyway. Read from the module's source, so that any
    other module that imports vLLM still fails its collection loudly."""
    if _HIDER is None or collection_path.suffix != ".py":
        return None
    return True if whole_module_marked(collection_path, "engine") else None


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that starts vLLM through a fixture ``engine``; put the tests of shared
    servers and the heavy ones in their xdist groups, and the longest units first
    (``tests/scheduling.py``)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & (ENGINE_FIXTURES | SERVER_FIXTURES):
            item.add_marker(pytest.mark.engine)
        group = group_of(item, fixtures, SERVER_FIXTURES)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if group in (HEAVY, SERVERS) and item.get_closest_marker("timeout") is None:
            # Their waits allow an engine's start-up tests.e2e.terminal.STARTUP_S; the first
            # test of the shared servers waits for three servers started together.
            item.add_marker(pytest.mark.timeout(HEAVY_TIMEOUT_S))
    order_units(items)
