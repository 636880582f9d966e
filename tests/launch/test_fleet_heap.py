"""A fleet's start-up heap is frozen once its watches have read their servers: full
collections then walk only what came after (at a thousand servers they paused every watch
370-700 ms, and those pauses made the oldest rows)."""

from __future__ import annotations

import gc

import pytest

from stepview.launch import fleet


def test_the_start_up_heap_is_frozen_after_a_while_and_a_stop_before_then_cancels_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.unfreeze()
    try:
        monkeypatch.setattr(fleet, "FREEZE_AFTER_S", 30.0)
        cancelled = fleet.freeze_start_up_heap()
        cancelled.cancel()  # a fleet that stopped before then
        cancelled.join(10)
        assert not cancelled.is_alive() and gc.get_freeze_count() == 0
        monkeypatch.setattr(fleet, "FREEZE_AFTER_S", 0.01)
        timer = fleet.freeze_start_up_heap()
        timer.join(10)
        assert gc.get_freeze_count() > 0  # what the process held is out of the collector's reach
    finally:
        gc.unfreeze()
