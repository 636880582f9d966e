"""Make the README's SVG screenshots from the app itself, from a fixed scenario.

    .venv/bin/python scripts/screenshots.py [--out screenshots] [--size 100x30]

The scenes and the key presses are the ones the SVG snapshot tests use (``stepview.demo``),
and the replay is the trace the tests replay (``tests/data/replay.trace.jsonl``, read as a
file), so a picture here is the same on every run and machine, needs no engine, and changes
only when the UI does. Open the SVGs in a browser to check them.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot

from stepview.testing import scenes
from stepview.testing.snapshots import mid_run
from stepview.ui.app import StepviewApp

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "data" / "replay.trace.jsonl"

Scene = Callable[[Pilot[None]], Awaitable[None]] | None


def _mid_run() -> StepviewApp:
    return scenes.make_app(mid_run())[0]


def _story() -> StepviewApp:
    return scenes.story_app()[0]


def _replay() -> StepviewApp:
    return scenes.replay_app(TRACE)[0]


SCENES: dict[str, tuple[Callable[[], StepviewApp], Scene]] = {
    "main-mid-run": (_mid_run, None),
    "form-validation-error": (_mid_run, scenes.show_form_error),
    "request-detail": (_mid_run, scenes.show_detail),
    "logprob-heatmap": (_mid_run, scenes.show_heatmap),
    "fork-form": (_mid_run, scenes.show_fork_form),
    "replay-paused": (_replay, scenes.at_step(17)),
    "timeline-strip": (_story, scenes.show_strip),
    "step-view": (_story, scenes.show_step_view),
    "latency-panel": (_story, scenes.show_latency),
}


async def shoot(
    name: str, make: Callable[[], StepviewApp], scene: Scene, size: tuple[int, int], out: Path
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
        print(asyncio.run(shoot(name, make, scene, (width, height), args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
