"""Make the README's SVG screenshots from the app itself, from fixed scenarios.

    .venv/bin/python scripts/screenshots.py [--out screenshots] [--size 100x30]

Most pictures replay ``screenshots/data/smollm2-run.trace.jsonl``: a real run of the built-in
SmolLM2-135M-Instruct (real text, real logprobs, real queueing and preemptions), recorded once
on a 2-core CPU with::

    stepview --headless --prompts screenshots/data/smollm2-prompts.jsonl --admit-per-step 0 \
        --max-num-seqs 6 --kv-cache-memory-bytes 16M --max-model-len 512 \
        --record screenshots/data/smollm2-run.trace.jsonl

(a small KV cache on purpose, so that requests queue and get preempted). The form, the
insight views over the preemption story and the comparison use the scenes the SVG snapshot
tests use (:mod:`stepview.testing.scenes`). Every picture is the same on every run and
machine, needs no engine, and changes only when the UI or the recording does. Open the SVGs
in a browser to check them.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.app import App
from textual.pilot import Pilot

from stepview.testing import scenes
from stepview.testing.fleet_scene import WINDOW, fleet_members
from stepview.testing.snapshots import mid_run
from stepview.ui.app import StepviewApp
from stepview.ui.fleet.fleet_app import FleetApp
from stepview.ui.main.request_table import RequestTable

ROOT = Path(__file__).resolve().parent.parent
REAL_TRACE = ROOT / "screenshots" / "data" / "smollm2-run.trace.jsonl"
MID_RUN_STEP = 110  # five finished, three decoding, two preempted, three waiting

Scene = Callable[[Pilot[None]], Awaitable[None]] | None


def _press(*keys: str) -> Scene:
    async def go(pilot: Pilot[None]) -> None:
        await pilot.press(*keys)
        await pilot.pause()

    return go


def _fake_mid_run() -> StepviewApp:
    return scenes.make_app(mid_run())[0]


def _story() -> StepviewApp:
    return scenes.story_app()[0]


def _real() -> StepviewApp:
    return scenes.replay_app(REAL_TRACE)[0]


def _chain(*steps: Scene) -> Scene:
    async def go(pilot: Pilot[None]) -> None:
        for step in steps:
            if step is not None:
                await step(pilot)

    return go


def _open(request_id: str, *then: str, pane: str = "#running") -> Scene:
    """Select ``request_id`` in ``pane`` (moving the cursor row by row), open its detail, then
    press ``then``."""

    async def go(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, StepviewApp)
        table = app.query_one(pane, RequestTable)
        table.focus()
        await pilot.press("home")
        for _ in range(table.row_count):
            selected = table.selected
            if selected is not None and selected.request_id == request_id:
                break
            await pilot.press("down")
        selected = table.selected
        found = None if selected is None else selected.request_id
        assert found == request_id, f"{request_id} not in {pane} (the cursor is on {found})"
        await pilot.press("enter", *then)
        await pilot.pause()

    return go


MID_RUN = scenes.at_step(MID_RUN_STEP)


def _fleet() -> App[Any]:
    app = FleetApp(fleet_members(), window=WINDOW)
    app.animation_level = "none"
    return app


SCENES: dict[str, tuple[Callable[[], App[Any]], Scene]] = {
    "main-mid-run": (_real, MID_RUN),
    "form-validation-error": (_fake_mid_run, scenes.show_form_error),  # a replay adds nothing
    "request-detail": (_real, _chain(MID_RUN, _open("batching"))),
    "logprob-heatmap": (_real, _chain(MID_RUN, _open("batching", *["right"] * 6))),
    "fork-form": (_fake_mid_run, scenes.show_fork_form),  # a replay forks nothing
    "replay-paused": (_real, scenes.at_step(60)),
    "waiting-stretch": (
        _real,
        _chain(scenes.at_end, _open("kvcache", *["comma"] * 5, pane="#finished")),
    ),
    "timeline-strip": (_story, scenes.show_strip),
    "step-view": (_real, scenes.at_step(MID_RUN_STEP, "v")),
    "latency-panel": (_real, _chain(scenes.at_end, _press("t"))),
    "fleet": (_fleet, None),
}
SIZES = {"fleet": (120, 14)}  # the fleet's columns need 120; the rest use --size


async def shoot(
    name: str, make: Callable[[], App[Any]], scene: Scene, size: tuple[int, int], out: Path
) -> Path:
    app = make()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        if scene is not None:
            await scene(pilot)
        path = app.save_screenshot(filename=f"{name}.svg", path=str(out))
    return Path(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--size", default="100x30", help="terminal COLUMNSxROWS")
    args = parser.parse_args(argv)
    width, height = (int(n) for n in args.size.lower().split("x"))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (make, scene) in SCENES.items():
        size = SIZES.get(name, (width, height))
        print(asyncio.run(shoot(name, make, scene, size, args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
