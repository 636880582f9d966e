"""Which of stepview's own flags cannot go together, or with the engine flags given: each
answered as the one-line message the command prints before exiting with code 2.

Kept apart from :mod:`stepview.cli.dispatch` because these rules need no vLLM and run no mode:
they read the parsed :class:`~stepview.cli.args.OwnOptions` alone, so a mistake is refused at
once, before ``import vllm`` or any file is opened, and the rules of every mode are in one place
to read side by side (a flag added to a mode gets its refusal here, next to its neighbours').
"""

from __future__ import annotations

from stepview.cli.args import OwnOptions, stated_max_model_len
from stepview.cli.attach import SCRAPE_INTERVAL_S, WINDOW_S, is_metrics_address
from stepview.cli.events import events_conflict
from stepview.cli.watch import FLIGHT_MAX_MB

STDIN_PROMPTS_IN_TUI = (
    "--prompts - reads standard input, which the TUI needs for keys; use --headless, or give a file"
)


def flag_conflict(own: OwnOptions, engine_argv: list[str]) -> str | None:
    """The first reason the flags cannot be used as given, or ``None`` when they can."""
    if own.json and not own.headless:
        return "--json needs --headless"
    if own.prompts_on_stdin and not own.headless and own.replay is None:
        # Refused, not read: the TUI reads its keys from standard input.
        return STDIN_PROMPTS_IN_TUI
    if own.replay is None and (own.paused or own.replay_speed != 1.0):
        return "--paused and --replay-speed go with --replay FILE"
    if own.replay is None and own.rerun is None and own.summary:
        return "--summary goes with --replay FILE or --rerun TRACE"
    problem = _rerun_conflict(own)
    problem = problem or (_compare_conflict(own) if own.compare is not None else None)
    problem = problem or _playback_conflict(own)
    problem = problem or (
        _fleet_conflict(own, engine_argv) if own.is_fleet else _attach_conflict(own, engine_argv)
    )
    problem = problem or _load_conflict(own, engine_argv)
    problem = problem or _watch_conflict(own)
    problem = problem or events_conflict(own)  # the event stream's own rules (cli/events.py)
    if problem is None and own.replay is not None and engine_argv:
        return f"--replay takes no engine flags (got {' '.join(engine_argv)})"
    return problem


def _load_conflict(own: OwnOptions, engine_argv: list[str]) -> str | None:
    """Why the load flags cannot be used as given, if they cannot (no vLLM needed)."""
    orphans = own.load_flags_without_load()
    if orphans:
        return f"{', '.join(orphans)} go with --load N"
    spec = own.load_spec()
    if spec is None:
        return None
    if own.replay is not None:
        return "--load sends requests to an engine; a replay only plays a trace"
    if own.attach is not None:
        return "--load runs on an engine of stepview's own (no --attach)"
    max_model_len = stated_max_model_len(engine_argv)
    return None if max_model_len is None else spec.length_problem(max_model_len)


def _watch_conflict(own: OwnOptions) -> str | None:
    """Why the flags of a watch left running cannot be used as given, if they cannot."""
    if own.record_rotate is not None and own.record is None:
        return "--record-rotate goes with --record FILE"
    if own.record_keep is not None and own.record_rotate is None:
        return "--record-keep goes with --record-rotate SIZE"
    if own.flight_recorder is None and (
        own.flight_dir is not None or own.flight_max_mb != FLIGHT_MAX_MB
    ):
        return "--flight-dir and --flight-max-mb go with --flight-recorder DURATION"
    if own.metrics_port is None and own.metrics_host:
        return "--metrics-host goes with --metrics-port PORT"
    if own.replay is not None:
        given = [
            flag
            for flag, value in (
                ("--metrics-port", own.metrics_port),
                ("--flight-recorder", own.flight_recorder),
                ("--stuck-after", own.stuck_after),
            )
            if value is not None
        ]
        if given:
            return f"{', '.join(given)} watch a running engine; a replay has none"
    return None


def _rerun_conflict(own: OwnOptions) -> str | None:
    """Why the flags of a rerun, or of a workload export, cannot be used as given.

    A rerun is a live run of stepview's own engine, fed the trace's requests: not a replay,
    not a watch, and no other requests beside them. Its ``--summary`` is the compare table on
    stdout, which the requests ``--json`` prints would be mixed with. A workload is exported
    from a trace, as the other exports of ``--replay`` are.
    """
    if own.export_workload and own.replay is None:
        return "--export-workload goes with --replay TRACE: the workload of a recorded run"
    if own.rerun is None:
        return "--rerun-speed goes with --rerun TRACE" if own.rerun_speed != 1.0 else None
    if own.replay is not None:
        return "--rerun and --replay exclude each other (send a trace's requests again, or play it)"
    if own.attach is not None:
        return "--rerun runs on an engine of stepview's own (no --attach)"
    if own.prompts is not None or own.load is not None:
        return "--rerun sends the trace's requests: no --prompts or --load beside them"
    if own.summary and own.json:
        return "--json prints each request and --summary the compare table: give one of them"
    return None


def _compare_conflict(own: OwnOptions) -> str | None:
    """Why ``--compare`` cannot be used as given (the files are checked when read)."""
    if own.attach is not None or own.headless:
        return "--compare goes with --replay A only (not with --attach or --headless)"
    if own.replay is None:
        return "--compare FILE goes with --replay FILE: compare two recorded runs"
    if own.export_csv is not None or own.export_chrome_trace is not None or own.export_workload:
        return "--compare and the exports exclude each other (export one trace at a time)"
    return None


def _playback_conflict(own: OwnOptions) -> str | None:
    """Why ``--paused`` / ``--replay-speed`` would do nothing here, if they would.

    They set how the TUI plays a replay; the compare view has no playback (both runs move
    by hand, from their first difference), and the summary and exports open no TUI.
    """
    if not own.paused and own.replay_speed == 1.0:
        return None
    if own.compare is not None:
        return (
            "--compare does not play the runs (keys move both, from their first difference): "
            "drop --paused and --replay-speed"
        )
    if (
        own.summary
        or own.export_csv is not None
        or own.export_chrome_trace is not None
        or own.export_workload
    ):
        return "--paused and --replay-speed go with a replay in the TUI, not --summary or exports"
    return None


def _attach_conflict(own: OwnOptions, engine_argv: list[str]) -> str | None:
    """Why the flags cannot go together with (or without) ``--attach``, if they cannot."""
    if not is_metrics_address(own.attach) and (
        own.scrape_interval != SCRAPE_INTERVAL_S or own.window != WINDOW_S
    ):
        return "--scrape-interval and --window go with --attach http://HOST:PORT"
    if own.kv_events is not None and not is_metrics_address(own.attach):
        return "--kv-events goes with --attach http://HOST:PORT (the server's /metrics)"
    if own.attach is None:
        if own.api is not None or own.attach_ranks is not None or own.nice is not None:
            return "--api, --attach-ranks and --nice go with --attach ADDRESS"
        if own.api_key is not None:
            return "--api-key goes with --attach ADDRESS --api URL"
        return None
    if own.replay is not None:
        return "--attach and --replay exclude each other (watch a server, or replay a trace)"
    if engine_argv:
        return (
            f"--attach takes no engine flags: the server was started with its own "
            f"(got {' '.join(engine_argv)})"
        )
    if is_metrics_address(own.attach):
        return _metrics_conflict(own)
    if own.api_key is not None and own.api is None:
        return "--api-key goes with --api URL: the key is for the server's API"
    if own.prompts is not None and own.api is None:
        return "--prompts with --attach needs --api URL: prompts go through the server's API"
    return None


# Flags that act on or record one server's requests, by OwnOptions field.
ONE_SERVER_FLAGS = (
    *("api", "prompts", "record", "results", "metrics_port", "flight_recorder"),
    *("stuck_after", "export_csv", "export_chrome_trace"),
)


def _given(own: OwnOptions, names: tuple[str, ...]) -> list[str]:
    """The flags among ``names`` (OwnOptions fields) that the command line set."""
    return [f"--{name.replace('_', '-')}" for name in names if getattr(own, name) is not None]


def _fleet_conflict(own: OwnOptions, engine_argv: list[str]) -> str | None:
    """Why the flags cannot go with several ``--attach`` servers, or a listing of them
    (``prometheus://``, a file_sd ``--attach-file``): a fleet is watched, with the
    figures every kind of server gives; what acts on or records one server's requests needs
    that server alone (``--attach ADDRESS``)."""
    if own.replay is not None:
        return "--attach and --replay exclude each other (watch a server, or replay a trace)"
    if engine_argv:
        return f"--attach takes no engine flags (got {' '.join(engine_argv)})"
    given = _given(own, ONE_SERVER_FLAGS)
    if not given:
        return None
    fleet = (
        f"a fleet listed by {own.discovery[0].name}"
        if own.discovery
        else f"several servers ({len(own.fleet)} given)"
    )
    return f"{', '.join(given)}: not with {fleet}; attach to one server alone for those"


def _metrics_conflict(own: OwnOptions) -> str | None:
    """Why a flag cannot go with ``--attach http://…``: those that need the plug-in's records
    of each request, which ``/metrics`` does not have."""
    given = _given(own, ("api", "attach_ranks", *ONE_SERVER_FLAGS[1:]))
    if not given:
        return None
    return (
        f"{', '.join(given)}: not with --attach http://HOST:PORT, which reads the server's "
        "/metrics (no requests); restart the server with stepview's plug-in and attach to "
        "its STEPVIEW_PUBLISH address for those"
    )
