"""``stepview --replay FILE``: the same UI over a recorded trace, without vLLM or torch.

Nothing here or in what it imports loads vLLM (a test checks it): a trace recorded on a GPU
box opens on a laptop where vLLM is not installed.
"""

from __future__ import annotations

from pathlib import Path

from stepview.launch.exits import EXIT_FAILED, EXIT_OK, fail
from stepview.launch.runner import run_app
from stepview.launch.terminal import claim_terminal
from stepview.trace.format import TraceError
from stepview.trace.replay import ReplaySource


def run_replay(path: Path, *, speed: float, paused: bool) -> int:
    """Play the trace at ``path`` in the TUI; returns the exit code."""
    try:
        source = ReplaySource(path, speed=speed, start_paused=paused)
    except TraceError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot read trace {path}: {exc.strerror or exc}")
    problem = claim_terminal("")
    if problem is not None:
        return fail(problem)
    app_code = run_app(source, replay=True)
    return EXIT_FAILED if app_code else EXIT_OK
