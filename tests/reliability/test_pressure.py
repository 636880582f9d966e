"""Pressure: an engine much faster than the screen, 10 000 requests, aborts that hit nothing.

The UI pulls the latest snapshot 15 times a second and skips the rest, so a fast engine must
cost it nothing more, and nothing may queue up between them: the driver's history is a
bounded ring, and the process's memory stays flat while thousands of steps go by.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import psutil
import pytest

from stepview.files.results_file import ResultsWriter
from stepview.model.commands import Abort, AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState, StepSnapshot
from stepview.testing.scenes import until
from tests.e2e.conftest import OpenTerminal
from tests.e2e.terminal import (
    QUIT_WITHIN_S,
    STARTUP_S,
    STEPVIEW,
    alive,
    process_tree,
    wait_gone,
)
from tests.reliability.faults import (
    SIZE,
    FaultyEngine,
    driver_for,
    leftovers,
    new_app,
    running_now,
)

HISTORY = 256
MiB = 1024 * 1024


def rss() -> int:
    return int(psutil.Process().memory_info().rss)


async def test_engine_far_faster_than_the_ui_queues_nothing_and_memory_stays_flat() -> None:
    before = running_now()
    # Long requests keep the engine stepping flat out (no delay) for the whole test.
    engine = FaultyEngine(max_num_seqs=8, max_model_len=10**7)
    driver = driver_for(engine, history_size=HISTORY)
    app = new_app(driver)
    drawn: list[StepSnapshot] = []
    async with app.run_test(size=SIZE) as pilot:
        show = app.show_snapshot

        def counting(snapshot: StepSnapshot) -> None:
            drawn.append(snapshot)
            show(snapshot)

        app.show_snapshot = counting  # type: ignore[method-assign]
        for i in range(8):
            driver.send(AddRequest(f"r{i}", "go on", SamplingSpec(max_tokens=10**6)))
        await until(pilot, lambda: driver.latest().step >= 2_000, timeout=60)
        rss_warm, step_warm, started, frames_warm = (
            rss(),
            driver.latest().step,
            time.monotonic(),
            len(drawn),
        )
        await until(pilot, lambda: driver.latest().step >= step_warm + 20_000, timeout=120)
        elapsed = time.monotonic() - started
        steps = driver.latest().step - step_warm
        frames = len(drawn) - frames_warm
        growth = rss() - rss_warm
        assert len(driver.history()) == HISTORY  # a ring: the oldest go
        await pilot.press("q")
    assert not driver.alive
    assert leftovers(before) == []
    # The screen took what it could (at most POLL_HZ a second) and skipped the rest.
    assert frames <= app.POLL_HZ * elapsed * 1.5 + 5, (frames, elapsed)
    assert steps >= 10 * frames, (steps, frames)
    # 20 000 steps of 8 requests keep 160 000 tokens (~2 MiB); keeping every snapshot
    # instead of a ring of them adds ~2 KiB a step (~40 MiB here, measured).
    assert growth < 10 * MiB, f"RSS grew {growth / MiB:.1f} MiB over {steps} steps"


async def test_aborting_a_finished_unknown_or_already_aborted_request_is_harmless(
    tmp_path: Path,
) -> None:
    before = running_now()
    results = tmp_path / "results.jsonl"
    engine = FaultyEngine()
    driver = driver_for(engine, sinks=(ResultsWriter(results),))
    app = new_app(driver)
    notices: list[str] = []

    def notify(message: str, **_: object) -> None:
        notices.append(message)

    app.notify = notify  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        driver.send(AddRequest("done", "hello", SamplingSpec(max_tokens=2)))
        await until(pilot, lambda: [v.request_id for v in driver.latest().finished] == ["done"])
        driver.send(AddRequest("long", "hello", SamplingSpec(max_tokens=10**4)))
        for request_id in ("done", "no-such-request", "long", "long"):
            driver.send(Abort(request_id))
        driver.send(AddRequest("after", "hello", SamplingSpec(max_tokens=3)))
        await until(pilot, lambda: len(driver.latest().finished) == 3)
        states = {v.request_id: v.state for v in driver.latest().finished}
        assert states == {
            "done": RequestState.FINISHED,
            "long": RequestState.ABORTED,
            "after": RequestState.FINISHED,
        }
        # The panes follow the driver on the app's next tick: wait for them to show all three.
        await until(pilot, lambda: app.shown is not None and len(app.shown.finished) == 3)
        await pilot.press("tab", "x")  # the Finished pane: its newest row, already finished
        assert notices[-1] == "after is already finished."
        await pilot.press("q")
    assert [json.loads(line)["id"] for line in results.read_text().splitlines()] == [
        "done",
        "long",
        "after",
    ]
    assert leftovers(before) == []


@pytest.mark.e2e
@pytest.mark.engine
def test_ten_thousand_prompts_from_a_file_all_finish_and_the_app_stays_responsive(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    count = 10_000
    prompts = tmp_path / "big.jsonl"
    with prompts.open("w") as out:
        for i in range(count):
            params = {"max_tokens": 1, "seed": i}
            out.write(json.dumps({"prompt": f"request {i} about engines", "params": params}))
            out.write("\n")
    results = tmp_path / "results.jsonl"
    term = open_terminal(80, 24)
    log = tmp_path / "log.txt"
    term.run(
        [STEPVIEW, "--prompts", str(prompts), "--results", str(results), "--log-file", str(log)]
    )
    stepview = term.command_process()
    term.wait_for(lambda s: "RUNNING" in s and "Finished 0" not in s, timeout=STARTUP_S)
    tree = process_tree(stepview)
    asked = time.monotonic()
    term.keys("?")
    term.wait_for_text("Keys", timeout=30)  # the bound is below, on the app's own time
    answered = term.met_at - asked  # not counting tmux's own time to answer the last capture
    term.keys("Escape")
    term.wait_for(lambda s: f"Finished {count}" in s, timeout=180)
    term.keys("q")
    wait_gone(stepview, timeout=QUIT_WITHIN_S)
    assert term.wait_for_exit(timeout=15) == 0
    assert alive(tree) == []
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(records) == count
    assert {r["state"] for r in records} == {"finished"}
    assert answered < 2.0, f"help took {answered:.2f}s to open while 10 000 requests ran"
