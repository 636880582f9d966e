"""A fleet's ``server`` events: each server joins, comes up, falls behind, goes down, leaves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stepview.events.fleet import FleetEvents
from stepview.model.address import watch_address
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.model.targets import Member, Target
from stepview.testing.sources import StaticSource
from tests.events.checks import FixedRoster, validate_all


class _Out:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def put(self, events: Sequence[dict[str, Any]]) -> None:
        self.events.extend(events)


def _snapshot(state: EngineState, step: int = 3) -> StepSnapshot:
    return StepSnapshot(step=step, clock=1.0, engine_state=state, phase="lost the server")


def test_each_change_of_each_server_is_one_event() -> None:
    a = StaticSource(_snapshot(EngineState.STARTING))
    b = StaticSource(_snapshot(EngineState.RUNNING))
    behind: dict[int, float | None] = {id(a): None, id(b): None}
    roster = FixedRoster(
        [
            Member(Target(watch_address("tcp://10.0.0.1:5570"), (("zone", "a"),)), a),
            Member(Target(watch_address("http://10.0.0.2:8000")), b),
        ]
    )
    out = _Out()
    fleet = FleetEvents(roster, [out], lambda source: behind[id(source)])
    fleet.look()
    a.snapshot = _snapshot(EngineState.IDLE)
    fleet.look()
    fleet.look()  # nothing changed: nothing said
    behind[id(a)] = 5.0
    b.snapshot = _snapshot(EngineState.DISCONNECTED)
    fleet.look()
    roster.list = roster.list[:1]
    fleet.look()
    said = [(e["server"], e["state"]) for e in out.events]
    assert said == [
        ("tcp://10.0.0.1:5570", "joined"),
        ("http://10.0.0.2:8000", "joined"),
        ("http://10.0.0.2:8000", "up"),
        ("tcp://10.0.0.1:5570", "up"),
        ("tcp://10.0.0.1:5570", "behind"),
        ("http://10.0.0.2:8000", "down"),
        ("http://10.0.0.2:8000", "left"),
    ]
    assert out.events[0]["labels"] == {"zone": "a"}
    assert out.events[5]["message"] == "lost the server"
    assert validate_all(out.events) == len(out.events)
