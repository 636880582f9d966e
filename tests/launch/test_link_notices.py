"""What a headless attach says on stderr about its link, from the snapshots' states alone."""

from __future__ import annotations

import pytest

from stepview.launch import attach_headless
from stepview.launch.attach_headless import LinkNotices
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
