"""What a headless attach says on stderr about its link, from the snapshots' states alone."""

from __future__ import annotations

import pytest

from stepview.launch import attach_headless
from stepview.launch.attach_headless import LinkNotices
from stepview.model.engine_api import LinkState
from stepview.model.snapshot import EngineState, StepSnapshot

ADDRESS = "tcp://127.0.0.1:5570"
S = EngineState


def test_each_change_is_said_once(capsys: pytest.CaptureFixture[str]) -> None:
    clock = [100.0]
    notices = LinkNotices(ADDRESS, clock=lambda: clock[0])
    waiting = f"waiting for the server's records at {ADDRESS} (started with …?)"
    behind = "view 3 s behind the server, catching up"
    story: list[tuple[EngineState, str]] = [
        (S.STARTING, "starting engine"),
        (S.STARTING, f"connecting to {ADDRESS}"),
        (S.STARTING, waiting),
        (S.STARTING, waiting),
        (S.IDLE, ""),
        (S.RUNNING, ""),
        (S.RUNNING, behind),
        (S.RUNNING, "view 4 s behind the server, catching up"),  # still behind: quiet
        (S.RUNNING, ""),
        (S.RUNNING, behind),  # behind again within a minute: quiet
        (S.DISCONNECTED, f"DISCONNECTED from {ADDRESS} — reconnecting"),
        (S.DISCONNECTED, f"DISCONNECTED from {ADDRESS} — reconnecting"),
        (S.IDLE, ""),
    ]
    for step, (state, phase) in enumerate(story):
        clock[0] += 1
        notices.on_snapshot(StepSnapshot(step=step, clock=0.0, engine_state=state, phase=phase), [])
    assert notices.reached
    assert capsys.readouterr().err.splitlines() == [
        f"stepview: connecting to {ADDRESS}",
        f"stepview: {waiting}",
        f"stepview: watching {ADDRESS} (Ctrl+C to stop)",
        f"stepview: {behind}",
        f"stepview: DISCONNECTED from {ADDRESS} — reconnecting",
        f"stepview: back in touch with {ADDRESS}",
    ]
    clock[0] += attach_headless.BEHIND_NOTICE_EVERY_S
    notices.on_snapshot(StepSnapshot(step=99, clock=0.0, engine_state=S.RUNNING, phase=behind), [])
    assert capsys.readouterr().err == f"stepview: {behind}\n"  # a minute on: said again


def test_a_server_never_reached_is_not_reached() -> None:
    notices = LinkNotices(ADDRESS)
    notices.on_snapshot(StepSnapshot(step=0, clock=0.0, engine_state=S.STARTING), [])
    assert not notices.reached


def test_requests_lost_unseen_are_said_at_most_once_a_minute_and_at_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = [100.0]
    notices = LinkNotices(ADDRESS, clock=lambda: clock[0])
    unseen = [0]
    notices.link_state = lambda: LinkState(S.RUNNING, unseen=unseen[0])
    told = "arrived and ended while their records were lost (view behind, or link down)"
    for step, (lost, seconds) in enumerate([(0, 1), (3, 1), (5, 1), (5, 60), (5, 1), (9, 1)]):
        clock[0] += seconds
        unseen[0] = lost
        notices.on_snapshot(StepSnapshot(step=step, clock=0.0, engine_state=S.RUNNING), [])
    notices.close()
    lines = capsys.readouterr().err.splitlines()[1:]  # after "watching ..."
    assert [line.split(" at ")[0] for line in lines] == [
        "stepview: 3 requests",  # the first batch, at once
        "stepview: 2 more requests",  # a minute on
        "stepview: 4 more requests",  # quiet until the end, then the rest
    ]
    assert all(told in line and "not in the results file" in line for line in lines)
    assert lines[-1].endswith("(9 so far; stepview_requests_unseen_total counts them)")
