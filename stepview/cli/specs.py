"""The parsed flags (:class:`~stepview.cli.args.OwnOptions`) as the run's specs
(:mod:`stepview.run.spec`), the one form the modes read.

Made once the flags are known to go together (:mod:`stepview.cli.conflicts`) and the output
paths to be writable: what is parsed here (each ``--attach`` server's address, the KV
events' endpoint) is refused in one line naming its flag, as the modes always refused it.
"""

from __future__ import annotations

from stepview.cli.args import OwnOptions, own_option_names
from stepview.cli.attach import AddressError, watched_servers
from stepview.model.address import kv_events_endpoint
from stepview.outputs.printing import JSON
from stepview.outputs.registry import chosen_outputs
from stepview.run.spec import (
    EngineSpec,
    Feed,
    FrontEnd,
    Limits,
    Outputs,
    Playback,
    Rerun,
    RunSpec,
    WatchSpec,
)


def run_spec(own: OwnOptions, engine_argv: list[str]) -> RunSpec:
    """The run ``own`` and ``engine_argv`` ask for; :class:`AddressError` (its flag first)
    for an address that cannot be used."""
    servers = watched_servers(own.fleet, own.attach_ranks)
    try:
        kv_events = None if own.kv_events is None else kv_events_endpoint(own.kv_events)
    except ValueError as exc:
        raise AddressError(f"--kv-events: {exc}") from None
    replay = (
        None
        if own.replay is None
        else Playback(own.replay, own.replay_speed, own.paused, own.compare)
    )
    return RunSpec(
        engine=EngineSpec(tuple(engine_argv), tuple(own_option_names())),
        front=FrontEnd(own.headless, JSON.given(own.outputs), own.summary),
        feed=Feed(own.prompts, own.load_spec()),
        limits=Limits(own.history, own.keep_finished, own.admit_per_step, own.stuck_after),
        watch=WatchSpec(
            servers,
            own.discovery,
            own.attach,
            own.api,
            own.api_key,
            own.nice,
            own.scrape_interval,
            own.window,
            kv_events,
        ),
        outputs=Outputs(chosen_outputs(own.outputs), own.log_file),
        replay=replay,
        rerun=None if own.rerun is None else Rerun(own.rerun, own.rerun_speed),
    )
