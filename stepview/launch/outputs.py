"""What a live run writes, from opening it before the engine starts to the last word: the
one place every mode's outputs are opened, handed over and finished.

The outputs are the registry's (:mod:`stepview.outputs`): this module knows none by its
flag. :func:`open_outputs` opens every output the run asked for, before the engine starts
(a path that cannot be opened, or a port that cannot be had, stops the run before the
engine does anything: exit 2, one line, and what was already opened is undone);
:class:`RunOutputs` hands their sinks to the driver (:mod:`stepview.launch.compose`) and, at
the end, has each say where it spread its files and write what is written at the end, every
file that failed named, whether it failed mid-run (disk full) or while exporting.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from stepview.launch.exits import fail, notice, unfinished_note
from stepview.model.engine_api import LinkState
from stepview.model.epoch import EPOCH, RunEpoch
from stepview.model.sink import SnapshotSink
from stepview.model.snapshot import StepSnapshot
from stepview.outputs.entry import Ending, Opened, Opening, ServerOpening
from stepview.outputs.registry import OUTPUTS, keeps_epoch, keeps_steps, opening_order
from stepview.outputs.run_files import RESULTS, ResultsFile
from stepview.outputs.watching import FLIGHT, FlightOutput
from stepview.run.spec import RunSpec

if TYPE_CHECKING:
    from stepview.files.records import Annotate
    from stepview.insight.run import RunInsight
    from stepview.model.source import SnapshotSource
    from stepview.model.targets import Roster
    from stepview.trace.flight import FlightRecorder


class RunOutputs:
    """The run's open outputs, by entry name in registry order, and what is left to do with
    them at the end."""

    def __init__(self, opened: Mapping[str, Opened], epoch: RunEpoch | None = None) -> None:
        """``epoch``: the run's, noted by a sink ahead of the outputs' (``None``: no output
        needs it)."""
        self.opened = dict(opened)
        self.timed = epoch is not None
        self.sinks: list[SnapshotSink] = [
            *(() if epoch is None else (epoch,)),
            *(sink for output in self.opened.values() for sink in output.sinks),
        ]
        """Every output's sinks, for the run's driver, in registry order (after the
        epoch's, which they read)."""

    @property
    def results(self) -> Path | None:
        """Where the finished requests go (``None``: nowhere): the exit line names it."""
        output = self.opened.get(RESULTS.name)
        return output.path if isinstance(output, ResultsFile) else None

    @property
    def flight(self) -> FlightRecorder | None:
        """The ``--flight-recorder`` (already in :attr:`sinks`), for ``SIGUSR1``, the F key
        and the engine's stacks."""
        output = self.opened.get(FLIGHT.name)
        return output.recorder if isinstance(output, FlightOutput) else None

    def sinks_for(self, server: str, insight: RunInsight) -> list[SnapshotSink]:
        """The sinks for one of a fleet's drivers (the server at ``server``, whose driver
        observes with ``insight``): each output's for it, after a sink noting that driver's
        own epoch if an output needs it."""
        opening = ServerOpening(server, insight, RunEpoch())
        sinks = [sink for output in self.opened.values() for sink in output.sinks_for(opening)]
        return [opening.epoch, *sinks] if sinks and self.timed else sinks

    def follow_link(self, link: Callable[[], LinkState | None]) -> None:
        """A watched server's link (the driver's), for the outputs that report on it."""
        for output in self.opened.values():
            output.follow_link(link)

    def follow_fleet(
        self, roster: Roster, behind: Callable[[SnapshotSource], float | None]
    ) -> None:
        """A fleet's servers as they come and go, for the outputs that report on them."""
        for output in self.opened.values():
            output.follow_fleet(roster, behind)

    def printing_to(self, *, quiet: bool = False) -> TextIO:
        """Where the front end prints: standard output, or nowhere when it is ``quiet`` or
        an output writes standard output itself (``--events -``)."""
        if quiet or any(output.owns_stdout for output in self.opened.values()):
            return open(os.devnull, "w")
        return sys.stdout

    def discard(self) -> None:
        """The run never started (a usage error only the engine could see): undo what
        opening did (the results file stepview made for it, if empty; the metrics served)."""
        for output in reversed(self.opened.values()):
            output.discard()

    def report_results(self, unfinished: int) -> None:
        """The files the run spread over (:meth:`report_files`); then where the results
        are, if there are any (an empty default file is removed), and how many requests the
        run left unfinished (they are in the file too)."""
        self.report_files()
        results = self.opened.get(RESULTS.name)
        if not isinstance(results, ResultsFile) or results.is_empty():
            return
        note = unfinished_note(unfinished, None)
        also = f" ({note} recorded there too)" if note else ""
        notice(f"finished requests saved in {results.path}{also}")

    def report_files(self) -> None:
        """Name the files a long run spread over: a rotated trace's parts, flight recordings."""
        for output in self.opened.values():
            output.report(notice)

    def file_errors(self) -> list[str]:
        """Why a file stopped being written mid-run (disk full, file removed), one line each.

        The engine ran on regardless (a sink never stops it), so this is the only place the
        user learns that a file holds less than the run produced.
        """
        return [sink.error for sink in self.sinks if sink.error is not None]

    def finish(self, insight: RunInsight, snapshot: StepSnapshot) -> list[str]:
        """Write what is written at the end, from the run's ``insight`` and last
        ``snapshot``, each named as it is written; every file that failed, one line each
        (the mid-run failures first)."""
        errors = self.file_errors()
        ending = Ending(insight, snapshot, self.opened, notice)
        for output in self.opened.values():
            errors += output.finish(ending)
        self.close()
        return errors

    def close(self) -> None:
        """The run is over: each output closes what its drivers did not."""
        for output in self.opened.values():
            output.close()


def run_insight(spec: RunSpec) -> RunInsight:
    """The run insight for a live run: keeping every step's figures if an output needs them
    at the end, as many finished timelines as finished requests are kept, watching for
    requests stuck in the queue if ``--stuck-after`` asks."""
    from stepview.insight.alerts import Thresholds
    from stepview.insight.run import RunInsight

    return RunInsight(
        Thresholds(stuck_after=spec.limits.stuck_after),
        keep_steps=keeps_steps(spec.outputs),
        keep_done=spec.limits.keep_finished,
    )


def open_outputs(
    spec: RunSpec,
    header: Callable[[], Mapping[str, Any]],
    insight: RunInsight,
    *,
    default_results: bool,
    annotate: Annotate | None = None,
) -> RunOutputs | int:
    """Open every output the run asked for, before the engine starts; an exit code instead
    when one cannot be had (what was opened is undone then: nothing is left behind).

    ``default_results``: with no ``--results``, write a new results file in stepview's
    data directory (the TUI), instead of none (headless: the results are printed).
    ``header`` gives a trace header's extra fields once the engine is up; ``insight``
    adds each request's timeline and preemptions to its result (``annotate``: those and more).
    Each output is opened with those, the run's epoch (where its clock 0 is on the wall
    clock: noted, and added to ``header``, when an output needs it) and the outputs opened
    before it.
    """
    epoch = RunEpoch()
    timed = keeps_epoch(spec.outputs)
    if timed:  # the recordings' headers keep it, for their export as spans later
        header = _with_epoch(header, epoch)
    opened: dict[str, Opened] = {}
    opening = Opening(
        spec,
        header,
        insight,
        annotate or insight.request_fields,
        default_results,
        notice,
        epoch,
        opened,
    )
    for entry in opening_order():  # ports and folders first, files last
        chosen = entry.of(spec.outputs)
        if chosen is None or entry.open is None:
            continue
        output = entry.open(chosen, opening)
        if isinstance(output, str):
            RunOutputs(opened).discard()
            return fail(output)
        opened[entry.name] = output
    ordered = {entry.name: opened[entry.name] for entry in OUTPUTS if entry.name in opened}
    return RunOutputs(ordered, epoch if timed else None)


def _with_epoch(
    header: Callable[[], Mapping[str, Any]], epoch: RunEpoch
) -> Callable[[], Mapping[str, Any]]:
    """``header`` with the run's epoch added (a recording's export as spans reads it)."""

    def with_epoch() -> Mapping[str, Any]:
        return {**header(), EPOCH: round(epoch.now(), 6)}

    return with_epoch
