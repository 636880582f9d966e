"""Engine faults, injected by wrapping the engine: shown, contained, and never a lost result.

Pilot tests run the real :class:`Driver` over a :class:`FaultyEngine`; the real-command
tests run the installed code through ``launcher.py``, which patches vLLM's adapter the same
way, in tmux. Every test ends by checking that no thread or child process is left.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from textual.widgets import Static

from stepview.engine.driver.loop import Driver
from stepview.files.results_file import ResultsWriter
from stepview.model.commands import AddRequest, Resume
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, StepSnapshot
from stepview.testing.scenes import until
from stepview.ui.app import StepviewApp
from stepview.ui.detail.screen import DetailScreen
from stepview.ui.dialogs.help import HelpScreen
from stepview.ui.main.loading import ErrorScreen
from stepview.ui.main.request_table import RequestTable
from tests.e2e.conftest import OpenTerminal
from tests.e2e.terminal import (
    PROMPT,
    QUIT_WITHIN_S,
    STEPVIEW,
    Terminal,
    alive,
    command_env,
    process_tree,
    wait_gone,
)
from tests.helpers import DATA
from tests.reliability.faults import (
    SIZE,
    FaultyEngine,
    driver_for,
    leftovers,
    new_app,
    running_now,
)
from tests.reliability.launcher import LAUNCHER


def finished_ids(app: StepviewApp, state: RequestState | None = None) -> list[str]:
    table = app.query_one("#finished", RequestTable)
    rows = [table.row(i) for i in range(table.row_count)]
    return [v.request_id for v in rows if state is None or v.state is state]


def saved(path: Path) -> dict[str, dict[str, object]]:
    """The results file, by request id; every line must be whole JSON."""
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


# -- pilot tests on the driver ----------------------------------------------------------------


def error_shown(app: StepviewApp) -> bool:
    """The error screen is up and composed: pushed is not yet mounted on a busy machine, and
    the message's text, inside its scroll, mounts after the hint beside it (a busy run once
    found the hint and no message)."""
    screen = app.screen
    return isinstance(screen, ErrorScreen) and all(
        screen.query(selector) for selector in ("#error-hint", "#error-message Static")
    )


async def test_step_exception_shows_the_error_keeps_results_and_quits(tmp_path: Path) -> None:
    before = running_now()
    results = tmp_path / "results.jsonl"
    engine = FaultyEngine(fail_step_at=12)
    driver = driver_for(engine, sinks=(ResultsWriter(results),))
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        driver.send(AddRequest("quick", "hello", SamplingSpec(max_tokens=2)))
        driver.send(AddRequest("slow", "hello", SamplingSpec(max_tokens=100)))
        await until(pilot, lambda: error_shown(app))
        message = str(app.screen.query_one("#error-message Static", Static).render())
        assert "InjectedFault: CUDA error: device-side assert triggered" in message
        hint = str(app.screen.query_one("#error-hint", Static).render())
        assert "escape to look at the last state" in hint
        await pilot.press("escape")  # back to the panes: what finished is still there
        # ... and the request that was running ends as aborted, with the reason.
        assert finished_ids(app) == ["quick", "slow"]
        assert "ERROR" in str(app.query_one("#status").render())
        await pilot.press("q")
    assert not driver.alive
    assert saved(results)["quick"]["state"] == "finished"
    slow = saved(results)["slow"]
    assert slow["state"] == "aborted"
    assert slow["error"] == "engine failed: InjectedFault: CUDA error: device-side assert triggered"
    assert 0 < len(slow["completions"][0]["token_ids"]) < 100  # what it had produced is kept
    assert list(saved(results)) == ["quick", "slow"]
    assert leftovers(before) == []


async def test_add_request_exception_rejects_that_request_only(tmp_path: Path) -> None:
    before = running_now()
    results = tmp_path / "results.jsonl"
    engine = FaultyEngine(fail_add_prompt="poison")
    driver = driver_for(engine, sinks=(ResultsWriter(results),))
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        for request_id, prompt in (("a", "fine"), ("p", "poison"), ("b", "also fine")):
            driver.send(AddRequest(request_id, prompt, SamplingSpec(max_tokens=3)))
        await until(pilot, lambda: len(finished_ids(app)) == 3)
        assert finished_ids(app, RequestState.REJECTED) == ["p"]
        assert sorted(finished_ids(app, RequestState.FINISHED)) == ["a", "b"]
        table = app.query_one("#finished", RequestTable)
        table.focus()
        table.move_cursor(finished_ids(app).index("p"))
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        body = str(app.screen.query_one("#detail-body", Static).render())
        assert "InjectedFault: tokenizer exploded on this prompt" in body
        await pilot.press("escape")
        # The engine goes on: a later request is served.
        driver.send(AddRequest("c", "after the fault", SamplingSpec(max_tokens=2)))
        await until(pilot, lambda: "c" in finished_ids(app, RequestState.FINISHED))
        assert app.shown is not None and app.shown.engine_state is not EngineState.ERROR
        await pilot.press("q")
    assert saved(results)["p"]["error"] == "InjectedFault: tokenizer exploded on this prompt"
    assert {r["state"] for k, r in saved(results).items() if k != "p"} == {"finished"}
    assert leftovers(before) == []


async def test_engine_startup_failure_shows_the_error_screen_and_quits() -> None:
    before = running_now()

    def factory(phase: object) -> FaultyEngine:
        raise OSError("no such model: /models/missing")

    driver = Driver(factory)
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: error_shown(app))
        message = str(app.screen.query_one("#error-message Static", Static).render())
        assert "engine start-up failed: OSError: no such model: /models/missing" in message
        await pilot.press("a", "escape")  # nothing else works, nothing breaks
        assert isinstance(app.screen, ErrorScreen)
        await pilot.press("q")
    assert not driver.alive
    assert driver.error is not None and "no such model" in driver.error
    assert leftovers(before) == []


async def test_a_long_startup_error_scrolls_and_the_way_out_stays_visible() -> None:
    """vLLM's start-up errors can be a screenful (a pydantic report, say)."""
    long_message = "1 validation error for ModelConfig\n" + "  Value error, " + "words " * 300

    def factory(phase: object) -> FaultyEngine:
        raise ValueError(long_message)

    driver = Driver(factory)
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: error_shown(app))
        await pilot.pause()
        hint = app.screen.query_one("#error-hint", Static)
        assert "press q to quit" in str(hint.render())
        assert app.screen.get_widget_at(hint.region.x, hint.region.y)[0] is hint
        await pilot.press("q")
    assert not driver.alive


async def test_rejected_by_the_engine_is_a_result_too(tmp_path: Path) -> None:
    """``EngineRejected`` (vLLM refused the request) is saved with vLLM's own message."""
    results = tmp_path / "results.jsonl"
    engine = FaultyEngine(max_logprobs=5)
    driver = driver_for(engine, sinks=(ResultsWriter(results),))
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        driver.send(AddRequest("lp", "hello", SamplingSpec(logprobs=6)))
        await until(pilot, lambda: finished_ids(app) == ["lp"])
        await pilot.press("q")
    error = saved(results)["lp"]["error"]
    assert isinstance(error, str) and error.startswith("logprobs must be at most 5")


async def test_a_step_that_hangs_keeps_the_ui_responsive_and_quit_bounded() -> None:
    before = running_now()
    engine = FaultyEngine(block_step_at=3, step_delay=0.01)
    driver = driver_for(engine)
    app = new_app(driver)
    try:
        async with app.run_test(size=SIZE) as pilot:
            driver.send(AddRequest("r", "hello", SamplingSpec(max_tokens=50)))
            driver.send(Resume())
            await until(pilot, engine.blocking.is_set)
            await pilot.press("question_mark")  # keys still work while the engine hangs
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape", "down", "tab")
            assert app.focused is app.query_one("#finished", RequestTable)
            started = time.monotonic()
            await pilot.press("q")
        took = time.monotonic() - started
        assert took < QUIT_WITHIN_S, f"quit took {took:.1f}s"
        assert driver.alive  # abandoned in its step, as the command does before exiting
    finally:
        engine.released.set()
    driver.join(5)
    assert not driver.alive
    assert leftovers(before) == []


class UiBug(RuntimeError):
    """A bug in stepview's own drawing code, as a test plants it."""


async def test_a_crash_in_the_ui_still_stops_the_engine_and_keeps_results(tmp_path: Path) -> None:
    before = running_now()
    results = tmp_path / "results.jsonl"
    engine = FaultyEngine(step_delay=0.002)
    driver = driver_for(engine, sinks=(ResultsWriter(results),))
    app = new_app(driver)
    show = app.show_snapshot

    def buggy(snapshot: StepSnapshot) -> None:
        if len(snapshot.finished) >= 2:
            raise UiBug("drawing failed")
        show(snapshot)

    app.show_snapshot = buggy  # type: ignore[method-assign]
    with pytest.raises(UiBug):
        async with app.run_test(size=SIZE) as pilot:
            for i in range(4):
                driver.send(AddRequest(f"r{i}", "hello", SamplingSpec(max_tokens=2 + 10 * i)))
            await until(pilot, lambda: not app.is_running, timeout=10)
    assert app.return_code == 1  # the command exits 1 with it (run_app returns it)
    assert not driver.alive  # the app's unmount stopped the engine on the way out
    assert len(saved(results)) >= 2
    assert leftovers(before) == []


# -- the real command, faults injected into vLLM's adapter ------------------------------------


def start(
    term_args: list[str], open_terminal: OpenTerminal, tmp_path: Path
) -> tuple[Terminal, Path]:
    """The launcher with ``term_args`` in a fresh terminal: a quick and a long request."""
    term = open_terminal(80, 24)
    results = tmp_path / "results.jsonl"
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        json.dumps({"id": "quick", "prompt": "a short one", "params": {"max_tokens": 2}})
        + "\n"
        + json.dumps({"id": "long", "prompt": "a long one", "params": {"max_tokens": 400}})
        + "\n"
    )
    term.run(
        [
            *LAUNCHER,
            *term_args,
            "--",
            "--prompts",
            str(prompts),
            "--results",
            str(results),
            "--log-file",
            str(tmp_path / "log.txt"),
        ]
    )
    return term, results


@pytest.mark.e2e
@pytest.mark.engine
def test_real_command_hung_step_keys_work_and_quit_within_5s(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    term, results = start(["hang-step-from", "8"], open_terminal, tmp_path)
    stepview = term.command_process()
    term.wait_for(lambda s: "Finished 1" in s and "step 7" in s and "quick" in s, timeout=120)
    tree = process_tree(stepview)
    term.keys("?")
    # The help opens while the engine is stuck (for good: a slow screen on a busy machine
    # does not make it any less stuck, so the wait is long).
    term.wait_for_text("Keys", timeout=30)
    term.keys("Escape")
    term.wait_for(lambda s: "Keys" not in s and "Finished 1" in s, timeout=30)
    term.keys("q")
    wait_gone(stepview, timeout=QUIT_WITHIN_S)  # fails if it takes longer
    assert term.wait_for_exit(timeout=15) == 1
    screen = term.text()
    assert "stepview: the engine did not stop in time; exiting anyway" in screen
    assert (
        f"finished requests saved in {results} (1 unfinished request recorded there too)"
    ) in screen
    assert alive(tree) == []
    assert saved(results)["quick"]["state"] == "finished"
    assert saved(results)["long"]["state"] == "unfinished"  # the step never returned
    assert term.flag("alternate_on") == "0"


@pytest.mark.e2e
@pytest.mark.engine
def test_real_command_step_exception_error_screen_results_kept_exit_1(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    term, results = start(["raise-in-step", "8"], open_terminal, tmp_path)
    stepview = term.command_process()
    term.wait_for_text("The engine failed", timeout=120)
    screen = term.wait_for_text("InjectedFault", timeout=30)
    assert "press q to quit, escape to look at the last state" in screen.replace("\n", " ")
    tree = process_tree(stepview)
    term.keys("Escape")
    # The running one ended as aborted; one capture can catch a redraw half done: wait for all.
    term.wait_for(
        lambda s: (
            "Finished 2" in s
            and "quick" in s
            and "ERROR" in s
            and re.search(r"long .* aborted", s) is not None
        ),
        timeout=30,
    )
    term.keys("q")
    wait_gone(stepview, timeout=QUIT_WITHIN_S)
    assert term.wait_for_exit(timeout=15) == 1
    after = term.screen()
    assert "stepview: engine failed: InjectedFault: injected by the test at step 8" in after
    assert after.rstrip().endswith(PROMPT.rstrip())
    assert alive(tree) == []
    assert list(saved(results)) == ["quick", "long"]
    assert saved(results)["long"]["state"] == "aborted"
    assert saved(results)["long"]["error"].startswith("engine failed: InjectedFault")


@pytest.mark.e2e
@pytest.mark.engine
def test_real_command_engine_startup_failure_error_screen_then_exit_1(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    (not_a_model / "config.json").write_text('{"model_type": "no-such-architecture"}')
    term = open_terminal(80, 24)
    term.run(
        [
            STEPVIEW,
            "--model",
            str(not_a_model),
            "--results",
            str(tmp_path / "results.jsonl"),
            "--log-file",
            str(tmp_path / "log.txt"),
        ]
    )
    stepview = term.command_process()
    # The error screen's first paint is one large write: wait for its title, message and hint.
    term.wait_for(
        lambda s: (
            "The engine failed" in s and "engine start-up failed" in s and "press q to quit" in s
        ),
        timeout=120,
    )
    term.keys("q")
    wait_gone(stepview, timeout=QUIT_WITHIN_S)
    assert term.wait_for_exit(timeout=15) == 1
    after = term.screen()
    assert "stepview: engine start-up failed:" in after
    assert "Traceback" not in after
    assert (tmp_path / "results.jsonl").read_text() == ""  # given by the user: kept, empty


@pytest.mark.engine
def test_disk_full_keeps_the_engine_going_and_says_which_file_failed(tmp_path: Path) -> None:
    """``/dev/full`` as the results file and the log: every write fails with ENOSPC."""
    done = subprocess.run(
        [STEPVIEW, "--headless", "--json", "--results", "/dev/full", "--log-file", "/dev/full"],
        capture_output=True,
        text=True,
        timeout=180,
        env=command_env(),
        cwd=tmp_path,
    )
    assert done.returncode == 1
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["state"] for r in printed] == ["finished"] * 3  # the engine went on
    assert done.stderr == "stepview: writing /dev/full failed: [Errno 28] No space left on device\n"


@pytest.mark.e2e
def test_real_command_crash_in_the_ui_exits_1_and_leaves_nothing_behind(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    """A bug in stepview's UI (here in a replay, no vLLM needed) is a crash, and says so."""
    trace = DATA / "replay.trace.jsonl"
    term = open_terminal(80, 24)
    term.run([*LAUNCHER, "crash-ui", "3", "--", "--replay", str(trace)])
    stepview = term.command_process()
    tree = process_tree(stepview)
    assert term.wait_for_exit(timeout=30) == 1
    wait_gone(stepview, timeout=QUIT_WITHIN_S)
    assert alive(tree) == []
    assert "InjectedFault: injected by the test at step " in term.screen()
    assert term.flag("alternate_on") == "0"
