"""The driver's way out: each snapshot built from its state, and handed to readers and sinks.

Kept apart from :mod:`~stepview.engine.driver.loop` because this is the one part of the driver
other threads read: the UI takes :attr:`Publisher.latest` and :meth:`Publisher.history` from
its own thread while the driver thread publishes, so the history's lock and the latest
reference live here, beside what a snapshot is made of. The loop decides *when* to publish
and in which engine state; the :class:`Publisher` says *what* a snapshot holds (every field
named, from the ledger, the step figures, the arrivals and the engine's description line),
lets the run's insight add its alerts, and gives it to the sinks.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from stepview.engine.driver.arrivals import ArrivalQueue
from stepview.engine.driver.figures import StepFigures
from stepview.engine.driver.ledger import RequestLedger
from stepview.insight.run import RunInsight
from stepview.model.engine_api import LinkState, WatchedEngine
from stepview.model.sink import SnapshotSink
from stepview.model.snapshot import EngineInfo, EngineState, StepSnapshot

log = logging.getLogger(__name__)


class Publisher:
    """Builds and publishes the driver's snapshots; :attr:`latest` and :meth:`history` may be
    read from any thread, everything else is the driver thread's."""

    def __init__(
        self,
        ledger: RequestLedger,
        figures: StepFigures,
        arrivals: ArrivalQueue,
        *,
        sinks: Sequence[SnapshotSink],
        insight: RunInsight | None,
        history_size: int,
    ) -> None:
        """``insight`` sees every snapshot before the sinks do (``None``: no alerts)."""
        self._ledger = ledger
        self._figures = figures
        self._arrivals = arrivals
        self._sinks = list(sinks)
        self._insight_on = insight
        self._history: deque[StepSnapshot] = deque(maxlen=max(1, history_size))
        self._history_lock = threading.Lock()
        self._latest = StepSnapshot(step=0, clock=0.0, engine_state=EngineState.STARTING)
        # What the snapshots say of the engine, besides its state.
        self.info = EngineInfo()
        self.link: LinkState | None = None  # a watched engine's, as last published
        self.phase = "starting"
        self.phase_since = 0.0

    @property
    def latest(self) -> StepSnapshot:
        return self._latest

    def history(self) -> tuple[StepSnapshot, ...]:
        with self._history_lock:
            return tuple(self._history)

    def is_news(self, watched: WatchedEngine) -> bool:
        """A watched engine's link or description changed since the latest snapshot."""
        return watched.link() != self.link or watched.info != self.info

    def without_entries(self) -> None:
        """A step came without the scheduler's entries: the plug-in cannot tell any more (it
        switched itself off mid-run: :mod:`~stepview.model.engine_api`), which the engine's
        description, read once when it started, does not say. The snapshots say so from
        now on (``detailed_states``), for the metrics and whoever reads them."""
        if self.info.detailed_states:
            self.info = replace(self.info, detailed_states=False)

    def follow(self, watched: WatchedEngine) -> EngineState:
        """What a watched engine says of itself, for the next snapshot: its link (state,
        phase line, ranks) and description; its state is returned."""
        link = self.link = watched.link()
        self.info = watched.info
        self.phase = link.message
        return link.state

    def publish(self, state: EngineState, clock: float, failure: str | None) -> None:
        """Build the snapshot, naming every field (a test holds it to StepSnapshot's), add the
        insight's alerts, hand it to the readers and the sinks. ``failure`` is the phase line
        of an engine in ``ERROR``."""
        figures = self._figures
        ledger = self._ledger
        phase = failure if state is EngineState.ERROR else self.phase
        snapshot = StepSnapshot(
            step=figures.step,
            clock=clock,
            engine_state=state,
            info=self.info,
            phase=phase or "",
            phase_since=self.phase_since,
            step_time=figures.step_time,
            counters=figures.counters,
            active=ledger.active(),
            finished=ledger.finished(),
            recent=tuple(figures.recent),
            total_generated=figures.total_generated,
            ranks=() if self.link is None else self.link.ranks,
            budget=figures.budget,
            queue_reasons=figures.queue_reasons,
            arrivals=self._arrivals.count,
            server=None,  # an engine's, or the plug-in's records: not a /metrics watch
        )
        snapshot = self._with_alerts(snapshot)
        self._latest = snapshot
        with self._history_lock:
            self._history.append(snapshot)
        finished = ledger.take_finished()
        for sink in self._sinks:
            sink.on_snapshot(snapshot, finished)

    def _with_alerts(self, snapshot: StepSnapshot) -> StepSnapshot:
        """Feed the insight; the snapshot with the alerts that hold (a failing insight is
        dropped with a log line, never the engine)."""
        insight = self._insight_on
        if insight is None:
            return snapshot
        try:
            alerts = insight.observe(snapshot)
        except Exception:
            log.exception("run insight failed at step %d; it is turned off", snapshot.step)
            self._insight_on = None
            return snapshot
        return replace(snapshot, alerts=alerts) if alerts else snapshot

    def close_sinks(self) -> None:
        """The run is over: each sink closes (one failing does not keep the others open)."""
        for sink in self._sinks:
            try:
                sink.close()
            except Exception:
                log.exception("closing %r failed", sink)
