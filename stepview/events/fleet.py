"""``server`` events of a fleet: each server up, down, behind, joined or left, as it changes.

A fleet's servers are watched by different kinds of source (a driver of plug-in records, a
``/metrics`` watch), and servers join and leave as a discovery lists them, so their state is
followed from outside: :class:`FleetEvents` looks at each member's latest snapshot a few times
a second on a thread of its own (a reference read per server, no lock with any driver) and
says what changed. The requests' events come from each driver's own sink
(:meth:`~stepview.events.output.EventsOutput.sink`, naming its server).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from stepview.events import schema
from stepview.events.schema import When
from stepview.events.sink import Outlet
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.model.targets import Roster

BEHIND_S: Final = 2.0
"""A server whose view is further behind than this is ``behind``."""
LOOK_EVERY_S: Final = 0.25

_DOWN = frozenset({EngineState.DISCONNECTED, EngineState.ERROR, EngineState.STOPPED})


def server_state(snapshot: StepSnapshot, behind: float | None) -> str | None:
    """What a ``server`` event says of a server whose latest snapshot is ``snapshot``
    (``None`` while it is still starting: nothing to say yet)."""
    state = snapshot.engine_state
    if state in _DOWN:
        return schema.DOWN
    if state is EngineState.STARTING:
        return None
    if behind is not None and behind > BEHIND_S:
        return schema.BEHIND
    return schema.UP


class FleetEvents:
    """Follows a fleet's members and puts a ``server`` event into ``outlets`` for each change."""

    def __init__(
        self,
        roster: Roster,
        outlets: Sequence[Outlet],
        behind: Callable[[Any], float | None],
    ) -> None:
        """``behind``: how far a member's source is behind its server (``None``: unknown)."""
        self._roster = roster
        self._outlets = list(outlets)
        self._behind = behind
        self._said: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepview-fleet-events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2.0)
        self.look()  # the last word: who is still there

    def _run(self) -> None:
        while not self._stop.wait(LOOK_EVERY_S):
            self.look()

    def look(self) -> None:
        """One look at every member; the changes since the last, as events."""
        events: list[dict[str, Any]] = []
        now = time.time()
        members = self._roster.members()
        present = {member.address for member in members}
        for address in [a for a in self._said if a not in present]:
            del self._said[address]
            gone = When(0, 0.0, now, None, None)
            events.append(schema.server(gone, schema.LEFT, address, {}, None, "no longer listed"))
        for member in members:
            snapshot = member.source.latest()
            behind = self._behind(member.source)
            state = server_state(snapshot, behind)
            address = member.address
            labels = dict(member.labels)
            when = When(snapshot.step, snapshot.clock, now, None, None)
            if address not in self._said:
                self._said[address] = schema.JOINED
                joined = schema.server(when, schema.JOINED, address, labels, behind, "watched")
                events.append(joined)
            if state is None or self._said[address] == state:
                continue
            self._said[address] = state
            message = snapshot.phase if state == schema.DOWN else ""
            events.append(schema.server(when, state, address, labels, behind, message))
        if events:
            for outlet in self._outlets:
                outlet.put(events)
