"""What changed between snapshots, and scrubbing back through a source's bounded history."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import pairwise

import pytest

from stepview.engine.driver.loop import Driver
from stepview.model.commands import Abort, Pause, Resume, SingleStep
from stepview.model.snapshot import EngineState, RequestState, StepSnapshot
from stepview.testing.fake_engine import FakeEngine
from stepview.trace.encoder import diff_snapshots
from stepview.ui.main.history_cursor import HistoryCursor
from tests.helpers import wait_for
from tests.trace.runs import add, run_to_end


class _Kept:
    """A source keeping its last ``size`` snapshots, as the driver does."""

    def __init__(self, size: int) -> None:
        self._kept: deque[StepSnapshot] = deque(maxlen=size)
        self.step = 0

    def publish(self, count: int = 1) -> None:
        for _ in range(count):
            self._kept.append(StepSnapshot(self.step, self.step * 0.5, EngineState.RUNNING))
            self.step += 1

    def latest(self) -> StepSnapshot:
        return self._kept[-1]

    def history(self) -> Sequence[StepSnapshot]:
        return tuple(self._kept)


def test_diff_names_what_each_step_touched() -> None:
    driver = Driver(lambda phase: FakeEngine(), history_size=10_000, start_paused=True)
    driver.start()
    try:
        add(driver, "a", max_tokens=3)
        add(driver, "b", max_tokens=30)
        add(driver, "c", max_tokens=30)
        wait_for(driver, lambda s: len(s.active) == 3)
        for _ in range(5):
            driver.send(SingleStep())
        wait_for(driver, lambda s: s.step == 5)
        driver.send(Abort("c"))
        driver.send(Resume())
        run_to_end(driver, 3)
    finally:
        driver.stop()
    history = driver.history()
    first = diff_snapshots(None, history[0])
    assert not first and first.changed_ids == frozenset()
    seen_added: list[str] = []
    for before, after in pairwise(history):
        diff = diff_snapshots(before, after)
        seen_added.extend(v.request_id for v in diff.added)
        before_ids = {v.request_id: v for v in before.active}
        assert {v.request_id for v in diff.removed} == set(before_ids) - {
            v.request_id for v in after.active
        }
        for old, new in diff.changed:
            assert before_ids[new.request_id] is old and old is not new
        unchanged = [v for v in after.active if before_ids.get(v.request_id) is v]
        assert len(unchanged) + len(diff.changed) + len(diff.added) == len(after.active)
        assert list(diff.finished) == list(after.finished[len(before.finished) :])
        if any(v.state is RequestState.ABORTED for v in diff.finished):
            assert diff.changed_ids >= {"c"}
    assert seen_added == ["a", "b", "c"]


def test_cursor_follows_live_until_moved() -> None:
    source = _Kept(100)
    source.publish(10)
    cursor = HistoryCursor(source)
    assert cursor.live and cursor.current() is source.latest() and cursor.position() is None
    pinned = cursor.back()
    assert pinned.step == 8 and not cursor.live
    source.publish(5)  # the run goes on; the pinned snapshot does not move
    assert cursor.current() is pinned
    assert cursor.position() == (8, 15)
    assert cursor.back(3).step == 5
    assert cursor.forward().step == 6
    assert cursor.forward(100) is source.latest() and cursor.live


def test_cursor_jumps_by_step_and_to_the_ends() -> None:
    source = _Kept(100)
    source.publish(20)
    cursor = HistoryCursor(source)
    assert cursor.oldest().step == 0
    assert cursor.jump(12).step == 12
    assert cursor.jump(-5).step == 0
    assert cursor.jump(99) is source.latest() and cursor.live
    cursor.jump(3)
    assert cursor.go_live() is source.latest() and cursor.live


def test_cursor_falls_back_to_the_oldest_kept_when_its_snapshot_is_dropped() -> None:
    source = _Kept(8)
    source.publish(8)
    cursor = HistoryCursor(source)
    assert cursor.oldest().step == 0
    source.publish(3)  # steps 0..2 are gone
    assert cursor.current().step == 3
    assert cursor.position() == (0, 8)
    assert cursor.forward().step == 4


def test_cursor_on_a_running_driver() -> None:
    driver = Driver(lambda phase: FakeEngine(step_delay=0.001), history_size=64)
    driver.start()
    try:
        add(driver, "a", max_tokens=400)
        wait_for(driver, lambda s: s.step > 20)
        cursor = HistoryCursor(driver)
        back = cursor.back(5)
        wait_for(driver, lambda s: s.step > back.step + 10)
        assert cursor.current() is back
        driver.send(Pause())
        wait_for(driver, lambda s: s.engine_state is EngineState.PAUSED)
        assert cursor.forward(1_000) is driver.latest()
    finally:
        driver.stop()


@pytest.mark.parametrize("size", [1, 2])
def test_cursor_on_tiny_histories(size: int) -> None:
    source = _Kept(size)
    source.publish(5)
    cursor = HistoryCursor(source)
    assert cursor.back().step == (3 if size == 2 else 4)
    assert cursor.forward() is source.latest()
