"""``stepview --attach ADDRESS``: the TUI on a running vLLM server, watched, not driven.

Nothing here starts or imports vLLM: the server runs elsewhere (another terminal, another
machine through an ssh tunnel) with stepview's scheduler plug-in, and stepview subscribes to
its records (:mod:`stepview.engine.watch.link.attached`). Every flag is checked before the app
starts (a wrong address or URL is a one-line usage error, exit code 2); a server that is not up
yet is not an error: the app waits for it and says so.

Adding a prompt needs ``--api URL``: it goes through the server's completions endpoint.
Without it the add-prompt form is disabled, and says why, and other clients' prompts and
completions show as token counts (with it, the server's ``/detokenize`` gives their text).
Quitting closes stepview's sockets only; the server, and any request stepview sent it,
carry on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stepview.files.prompts_file import PromptsFileError, read_prompts
from stepview.launch.compose import run_driver, start_watch
from stepview.launch.exits import fail
from stepview.launch.outputs import open_outputs, run_insight
from stepview.launch.runner import run_app
from stepview.launch.tui import wrap_up
from stepview.model.address import PluginRecords
from stepview.run.spec import RunSpec

NO_API = (
    "Attached without --api: stepview can only watch. Start it with --api URL (the "
    "server's OpenAI-compatible address, e.g. http://127.0.0.1:8000) to add prompts."
)


def run_attach(spec: RunSpec, log_path: Path) -> int:
    """Watch the server publishing at ``spec.watch.name``; returns the exit code."""
    from stepview.engine.driver.loop import PhaseCallback
    from stepview.engine.records.curve import CurveKeyError, watch_keys
    from stepview.engine.watch.api.api_key import resolve_api_key
    from stepview.engine.watch.api.server_api import ServerApi
    from stepview.engine.watch.link.attached import AttachedEngine
    from stepview.engine.watch.link.server_stacks import ServerStacks
    from stepview.model.engine_api import Engine

    records = spec.watch.single
    assert isinstance(records, PluginRecords)
    address, ranks = records.text, records.ranks
    try:
        watch_keys()  # CURVE keys a tcp:// server may want: a wrong path stops us here
    except CurveKeyError as exc:
        return fail(f"--attach: {exc}")
    try:
        key = resolve_api_key(spec.watch.api_key)
        api = ServerApi(spec.watch.api, key) if spec.watch.api is not None else None
    except ValueError as exc:
        return fail(f"--api: {exc}")
    try:
        requests = read_prompts(spec.feed.prompts) if spec.feed.prompts else []
    except PromptsFileError as exc:
        return fail(str(exc))

    problem = start_watch(spec)
    if problem is not None:
        return fail(problem)

    def header() -> Mapping[str, Any]:
        return {"attached": address, "ranks": list(ranks), "api": spec.watch.api}

    insight = run_insight(spec)
    read_only = None if api is not None else NO_API
    # As the modes on an engine of stepview's own: headless, a results file only if named.
    outputs = open_outputs(spec, header, insight, default_results=not spec.front.headless)
    if isinstance(outputs, int):
        return outputs
    stacks = None
    if outputs.flight is not None:  # each recording asks the cores' plug-ins for their stacks
        stacks = outputs.flight.stacks = ServerStacks(records)

    def factory(phase: PhaseCallback) -> Engine:
        phase(f"connecting to {address}")
        return AttachedEngine(records, api=api, stacks=stacks)

    if spec.front.headless:
        from stepview.launch.attach_headless import watch_headless

        return watch_headless(
            spec, factory, outputs, requests, read_only=read_only, insight=insight
        )
    driver = run_driver(factory, spec, outputs=outputs, read_only=read_only, insight=insight)
    for request in requests:
        driver.send(request)
    app_code = run_app(driver, flight=outputs.flight)
    return wrap_up(driver, outputs, log_path, app_code)
