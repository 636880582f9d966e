"""``stepview --replay FILE``: the same UI over a recorded trace, without vLLM or torch."""

from __future__ import annotations

import argparse

from stepview.cli import EXIT_FAILED, EXIT_OK, _fail
from stepview.model.trace import TraceError


def run_replay(own: argparse.Namespace) -> int:
    from stepview.engine.replay import ReplaySource
    from stepview.run_tui import run_app

    try:
        source = ReplaySource(own.replay, speed=own.replay_speed, start_paused=own.paused)
    except TraceError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot read trace {own.replay}: {exc.strerror or exc}")
    try:
        app_code = run_app(source, replay=True)
    finally:
        source.stop()
    return EXIT_FAILED if app_code else EXIT_OK
