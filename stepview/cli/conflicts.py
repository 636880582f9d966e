"""Which of stepview's own flags cannot go together, or with the engine flags given: each
answered as the one-line message the command prints before exiting with code 2.

Kept apart from :mod:`stepview.cli.dispatch` because these rules need no vLLM and run no mode:
they read the parsed :class:`~stepview.cli.args.OwnOptions` alone, so a mistake is refused at
once, before ``import vllm`` or any file is opened, and the rules of every mode are in one place
to read side by side (a flag added to a mode gets its refusal here, next to its neighbours').
An output's rules are its entry's (:mod:`stepview.outputs`): here they are asked for
(:func:`~stepview.outputs.registry.output_conflict`), and the modes' rules name the outputs
by what the entries say of them (which sources they go with, what they need), never by a list.
"""

from __future__ import annotations

from stepview.cli.args import OwnOptions, stated_max_model_len
from stepview.outputs.entry import END, LIVE
from stepview.outputs.printing import JSON
from stepview.outputs.registry import engine_flags, output_conflict, trace_exports_given
from stepview.outputs.registry import one_server_flags as registry_flags
from stepview.run.spec import FLEET, METRICS_PAGE, SCRAPE_INTERVAL_S, WINDOW_S

STDIN_PROMPTS_IN_TUI = (
    "--prompts - reads standard input, which the TUI needs for keys; use --headless, or give a file"
)


def flag_conflict(own: OwnOptions, engine_argv: list[str]) -> str | None:
    """The first reason the flags cannot be used as given, or ``None`` when they can."""
    problem = output_conflict(own.outputs, own)
    if problem is not None:
        return problem
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
    problem = problem or _replay_conflict(own)
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


def _replay_conflict(own: OwnOptions) -> str | None:
    """Why what watches a running engine cannot go with a replay, if it is given."""
    if own.replay is None:
        return None
    given = engine_flags(own.outputs)
    if own.stuck_after is not None:
        given.append("--stuck-after")
    if given:
        return f"{', '.join(given)} watch a running engine; a replay has none"
    return None


def _rerun_conflict(own: OwnOptions) -> str | None:
    """Why the flags of a rerun, or of a workload export, cannot be used as given.

    A rerun is a live run of stepview's own engine, fed the trace's requests: not a replay,
    not a watch, and no other requests beside them. Its ``--summary`` is the compare table on
    stdout, which the requests ``--json`` prints would be mixed with.
    """
    if own.rerun is None:
        return "--rerun-speed goes with --rerun TRACE" if own.rerun_speed != 1.0 else None
    if own.replay is not None:
        return "--rerun and --replay exclude each other (send a trace's requests again, or play it)"
    if own.attach is not None:
        return "--rerun runs on an engine of stepview's own (no --attach)"
    if own.prompts is not None or own.load is not None:
        return "--rerun sends the trace's requests: no --prompts or --load beside them"
    if own.summary and JSON.given(own.outputs):
        return "--json prints each request and --summary the compare table: give one of them"
    return None


def _compare_conflict(own: OwnOptions) -> str | None:
    """Why ``--compare`` cannot be used as given (the files are checked when read)."""
    if own.attach is not None or own.headless:
        return "--compare goes with --replay A only (not with --attach or --headless)"
    if own.replay is None:
        return "--compare FILE goes with --replay FILE: compare two recorded runs"
    if trace_exports_given(own.outputs):
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
    if own.summary or trace_exports_given(own.outputs):
        return "--paused and --replay-speed go with a replay in the TUI, not --summary or exports"
    return None


def _attach_conflict(own: OwnOptions, engine_argv: list[str]) -> str | None:
    """Why the flags cannot go together with (or without) ``--attach``, if they cannot."""
    metrics = own.metrics_attach
    if not metrics and (own.scrape_interval != SCRAPE_INTERVAL_S or own.window != WINDOW_S):
        return "--scrape-interval and --window go with --attach http://HOST:PORT"
    if own.kv_events is not None and not metrics:
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
    if metrics:
        return _metrics_conflict(own)
    if own.api_key is not None and own.api is None:
        return "--api-key goes with --api URL: the key is for the server's API"
    if own.prompts is not None and own.api is None:
        return "--prompts with --attach needs --api URL: prompts go through the server's API"
    return None


def one_server_flags(own: OwnOptions, lacking: str) -> list[tuple[str, object]]:
    """The flags that act on or record one server's requests, with their values: what a
    ``lacking`` source (a fleet, a server read through its ``/metrics`` alone) cannot do.
    The outputs among them are those whose entries do not go with it: what records as the
    run goes, then what is written at its end."""
    outputs = own.outputs
    return [
        ("--api", own.api),
        ("--prompts", own.prompts),
        *registry_flags(outputs, LIVE, lacking),
        ("--stuck-after", own.stuck_after),
        *registry_flags(outputs, END, lacking),
    ]


def _given(flags: list[tuple[str, object]]) -> list[str]:
    """The flags among ``flags`` that the command line set."""
    return [flag for flag, value in flags if value is not None]


def _fleet_conflict(own: OwnOptions, engine_argv: list[str]) -> str | None:
    """Why the flags cannot go with several ``--attach`` servers, or a listing of them
    (``prometheus://``, a file_sd ``--attach-file``): a fleet is watched, with the
    figures every kind of server gives; what acts on or records one server's requests needs
    that server alone (``--attach ADDRESS``)."""
    if own.replay is not None:
        return "--attach and --replay exclude each other (watch a server, or replay a trace)"
    if engine_argv:
        return f"--attach takes no engine flags (got {' '.join(engine_argv)})"
    given = _given(one_server_flags(own, FLEET))
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
    api, *others = one_server_flags(own, METRICS_PAGE)
    given = _given([api, ("--attach-ranks", own.attach_ranks), *others])
    if not given:
        return None
    return (
        f"{', '.join(given)}: not with --attach http://HOST:PORT, which reads the server's "
        "/metrics (no requests); restart the server with stepview's plug-in and attach to "
        "its STEPVIEW_PUBLISH address for those"
    )
