"""The composition root: any run, built from its parts.

A run is a source (stepview's own engine, in either core mode; a server watched through its
plug-in's records; a server's ``/metrics`` page; a fleet; a replayed trace; a rerun of one,
:attr:`~stepview.run.spec.RunSpec.source`) shown by a front end (the TUI, or ``--headless``)
with the outputs the flags ask for (the registry's, :mod:`stepview.outputs`). This is the one
place that puts them together: it checks every file the outputs name (and the log) before
anything starts, sets up the log, and hands the run to the mode of its source, which says
what is particular to it (its engine or watch, its front end) and takes the rest from
:mod:`stepview.launch.compose` (the driver, the watch's start-up) and
:mod:`stepview.launch.outputs` (the outputs, opened, handed to the driver and finished).

A trace is its own source: played in the TUI, compared, summed up, or written by the outputs
the registry writes from a trace (:mod:`stepview.launch.export`), never with vLLM.

Each mode is imported only when chosen: the TUI must draw before anything heavy is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from stepview.launch.exits import fail
from stepview.launch.logs import setup_logging
from stepview.launch.paths import default_log_path
from stepview.outputs.paths import check_output_paths
from stepview.outputs.registry import output_paths, trace_outputs
from stepview.run.spec import FLEET, METRICS_PAGE, OWN, REPLAY, RERUN, WATCH, RunSpec

Mode = Callable[[RunSpec, Path], int]


def run(spec: RunSpec) -> int:
    """Run ``spec`` (flags already judged to go together); the exit code."""
    if spec.source == REPLAY:
        return replay(spec)
    named = {"--log-file": spec.outputs.log_file, **output_paths(spec.outputs)}
    problem = check_output_paths(named)
    if problem is not None:
        return fail(problem)
    log_path = spec.outputs.log_file or default_log_path()
    try:
        setup_logging(log_path)
    except OSError as exc:
        return fail(f"cannot write the log file {log_path}: {exc.strerror or exc}")
    return live_mode(spec)(spec, log_path)


def live_mode(spec: RunSpec) -> Mode:
    """The mode of ``spec``'s source and front end (a live one: not a replay)."""
    source = spec.source
    if source == FLEET:
        from stepview.launch.fleet import run_fleet

        return run_fleet
    if source == METRICS_PAGE:
        from stepview.launch.attach_metrics import run_metrics_attach

        return run_metrics_attach
    if source == WATCH:  # either front end: attach.py opens the headless one itself
        from stepview.launch.attach import run_attach

        return run_attach
    if source == RERUN:
        from stepview.launch.rerun import run_rerun

        return run_rerun
    assert source == OWN
    if spec.front.headless:
        from stepview.launch.headless import run_headless

        return run_headless
    from stepview.launch.tui import run_tui

    return run_tui


def replay(spec: RunSpec) -> int:
    """A recorded trace: compared, summed up, written by outputs, or played in the TUI."""
    playback = spec.replay
    assert playback is not None
    if playback.compare is not None:
        from stepview.launch.compare import run_compare

        return run_compare(playback.path, playback.compare, summary=spec.front.summary)
    if spec.front.summary:
        from stepview.launch.summary import run_summary

        return run_summary(playback.path)
    if trace_outputs(spec.outputs):
        from stepview.launch.export import export_replay

        return export_replay(spec)
    from stepview.launch.replay import run_replay

    return run_replay(playback.path, speed=playback.speed, paused=playback.paused)
