"""Problems a run shows (thrashing, stalls), as plain data the UI, traces and reports share.

The detectors live in :mod:`stepview.insight.alerts`; they run on the driver thread and put
the alerts that hold after a step into :attr:`StepSnapshot.alerts
<stepview.model.snapshot.StepSnapshot.alerts>`, so every reader of snapshots (the status bar,
the trace recorder, the headless summary) sees the same ones without importing the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

# Alert.kind
THRASH: Final = "thrash"  # one request preempted (or its prefill restarted) again and again
STALL: Final = "stall"  # requests wait and nothing was scheduled for several steps
KV_FULL: Final = "kv_full"  # the KV cache is full and no token was computed for several steps
STUCK: Final = "stuck"  # a request has waited longer than --stuck-after seconds
ALERT_KINDS: Final = (THRASH, STALL, KV_FULL, STUCK)


class Alert(NamedTuple):
    """One problem, from the step it was raised at; it stays in the snapshots while it holds.

    ``request_id`` names the request a thrash alert is about (None for run-wide alerts);
    ``text`` says it for a person, with the figures ("preempted 3 times, 540 tokens lost").
    """

    kind: str
    step: int  # the step it was raised at
    clock: float  # driver clock then
    text: str
    request_id: str | None = None

    @property
    def key(self) -> tuple[str, str | None]:
        """What identifies one alert across steps: its kind and request."""
        return (self.kind, self.request_id)


def alert_record(alert: Alert) -> dict[str, Any]:
    """An alert as a JSON object: the one way an alert is written by name.

    The run's summary (``--summary``, the headless table) and the trace's ``alert`` lines both
    write this, so a tool reading either finds the same keys; the clock is rounded to the
    microsecond like every clock in the insight's records. (A trace's step lines carry the same
    fields as a list, in :class:`Alert`'s field order: they repeat the alerts at every change.)
    """
    return {
        "kind": alert.kind,
        "step": alert.step,
        "clock": round(alert.clock, 6),
        "request_id": alert.request_id,
        "text": alert.text,
    }


def alert_from_record(data: Mapping[str, Any]) -> Alert:
    """The inverse of :func:`alert_record`."""
    return Alert(
        str(data["kind"]),
        int(data["step"]),
        float(data["clock"]),
        str(data["text"]),
        data.get("request_id"),
    )
