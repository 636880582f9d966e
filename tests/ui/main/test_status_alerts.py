"""The status bar's alert line: the latest alert, and how many others hold."""

from __future__ import annotations

from stepview.model.alerts import STALL, THRASH, Alert
from stepview.ui.main.status_bar import alert_text


def test_latest_alert_with_a_count_of_the_others() -> None:
    thrash = Alert(
        THRASH, 3, 1.0, "r7 thrashing: preempted 3 times, 540 computed tokens lost", "r7"
    )
    stall = Alert(STALL, 9, 2.0, "stall: 4 waiting, nothing scheduled for 8 steps")
    assert alert_text((thrash,)) == f"⚠ {thrash.text}"
    assert alert_text((thrash, stall)) == f"⚠ {stall.text} (+1)"
