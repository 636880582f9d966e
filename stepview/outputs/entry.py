"""What an output is, as one entry of the registry (:mod:`stepview.outputs.registry`).

An :class:`Output` says everything stepview needs to know of one output, so that nothing
else lists it: its flags (with their ``--help`` text and where ``--help`` shows them), the
spec its flags make, which sources it goes with and what it needs, the rules it brings
(companion flags, ``--headless`` only, its own refusals), the files it names (checked
before anything starts), and how it is opened before the run, written and finished after it,
or written from a recorded trace.

The entry is plain data with functions: importing it costs nothing (the command line reads
every entry to build its parser). What an output needs to write (the trace encoder, the
metrics server, the CSV writer) is imported inside its functions, when the run opens it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from stepview.model.epoch import RunEpoch
from stepview.model.sink import SnapshotSink
from stepview.run.spec import Outputs, RunSpec

if TYPE_CHECKING:
    import threading

    from stepview.insight.run import RunInsight
    from stepview.model.engine_api import LinkState
    from stepview.model.snapshot import StepSnapshot
    from stepview.model.source import SnapshotSource
    from stepview.model.targets import Roster
    from stepview.trace.store import Trace

S = TypeVar("S")
Values = Mapping[str, Any]
"""The output flags' values as parsed, by argparse ``dest`` (defaults included)."""
Say = Callable[[str], None]
"""How an output tells the user something: one ``stepview: ...`` line on stderr."""

# The sources a run can have (:mod:`stepview.run.spec`) are named by each entry: OWN, WATCH,
# METRICS_PAGE, FLEET, REPLAY (written from a trace, without the TUI), RERUN.

# What an output needs of the run.
STEPS = "steps"  # every step's figures, kept to the end (the insight keeps them)
FINISHED = "finished requests"  # each request as it finishes
TRACE = "a trace"  # a recorded trace, read whole
ENGINE = "a running engine"  # something live to watch: refused with a replay
WALL_CLOCK = "the run's epoch"  # where its clock 0 is on the wall clock (Opening.epoch)

# When an output writes.
PRINTS = "prints"  # on standard output, by the front end (the headless printer, a summary)
LIVE = "live"  # a sink the driver feeds each step, opened before the engine starts
END = "end"  # written once, when the run ends (or from a trace)

# Where ``--help`` shows a flag: each place is one spot in the command line's groups, and the
# flags of one place come in the registry's order.
HELP_PRINTING = "after --headless"
HELP_FILES = "after --admit-per-step"
HELP_SUMMARY = "after --compare"
HELP_EXPORTS = "end of the synthetic load group"
HELP_WORKLOAD = "end of the rerun group"
HELP_LONG_RUN = "after --keep-finished"
HELP_SERVED = "end of the leaving-it-running group"
HELP_GROUP = "a group of its own"  # with :attr:`Output.group`: after the command's groups


@dataclass(frozen=True, slots=True)
class Flag:
    """One flag of an output: its name, where ``--help`` shows it, and argparse's keywords
    (``type``, ``metavar``, ``help``, ``default``, ``action``)."""

    name: str
    place: str
    options: Mapping[str, Any] = field(default_factory=dict)
    at_least_one: bool = False
    """A count refused below 1 once parsed (not by its ``type``, so that a word keeps
    argparse's own "invalid int value")."""

    @property
    def dest(self) -> str:
        """Where argparse puts its value (``--export-csv``: ``export_csv``)."""
        return self.name.removeprefix("--").replace("-", "_")

    @property
    def default(self) -> Any:
        """Its value when not given."""
        return self.options.get("default")


@dataclass(frozen=True, slots=True)
class Companions:
    """Flags that do nothing without another: given (not at their default) without it,
    the run is refused with ``FLAGS go(es) with NEEDS``."""

    flags: tuple[str, ...]
    needs: str  # the flag they need, as the message names it ("--record FILE")
    requires: str  # that flag's argparse dest ("record")


class Asked(Protocol):
    """What an entry's own rules may read of the rest of the command line (the command
    line's parsed flags have this shape)."""

    @property
    def headless(self) -> bool: ...
    @property
    def replay(self) -> Path | None: ...
    @property
    def rerun(self) -> Path | None: ...
    @property
    def attach(self) -> str | None: ...
    @property
    def is_fleet(self) -> bool: ...
    @property
    def summary(self) -> bool: ...
    @property
    def compare(self) -> Path | None: ...


class Opened:
    """An output, open for one run: the sinks it hands the driver, and what it does at the
    end. Each entry's ``open`` returns one (a subclass saying what is particular to it)."""

    sinks: Sequence[SnapshotSink] = ()
    """Handed to the run's driver (the results writer, the trace recorder...)."""

    owns_stdout: bool = False
    """It writes standard output (``--events -``): the front end prints nothing else there."""

    def sinks_for(self, server: ServerOpening) -> Sequence[SnapshotSink]:
        """Sinks for one more driver of the run, a fleet's ``server`` (the outputs a fleet
        takes: the events and the spans of its plug-in servers' requests)."""
        return ()

    def follow_link(self, link: Callable[[], LinkState | None]) -> None:
        """A watched server's link (the driver's), for outputs that report on it."""

    def follow_fleet(
        self, roster: Roster, behind: Callable[[SnapshotSource], float | None]
    ) -> None:
        """A fleet's servers as they come and go (``behind``: how far a server's view is
        behind it, if known), for outputs that report on them."""

    def report(self, say: Say) -> None:
        """At the end: where it spread its files (a rotated trace's parts, recordings)."""

    def finish(self, ending: Ending) -> list[str]:
        """Write what is written at the end; why a file could not be, one line each."""
        return []

    def discard(self) -> None:
        """The run never started: undo what opening did (a default file, a port)."""

    def close(self) -> None:
        """The run is over: close what no one driver closes (what a fleet's drivers share)."""


@dataclass(slots=True)
class Opening:
    """What an output is opened with, before the engine starts."""

    spec: RunSpec
    header: Callable[[], Mapping[str, Any]]  # a trace header's extra fields, once up
    insight: RunInsight
    annotate: Callable[[str], Mapping[str, Any]]  # more fields for each request's record
    default_results: bool  # the TUI: a results file in stepview's data directory if unnamed
    say: Say
    epoch: RunEpoch = field(default_factory=RunEpoch)
    """Where the run's clock 0 is on the wall clock: noted by a sink ahead of every output's,
    and in ``header`` as ``epoch``, when an output needs it (:data:`WALL_CLOCK`)."""
    opened: Mapping[str, Opened] = field(default_factory=dict)
    """The outputs opened so far, by entry name (those before this one in opening order):
    for an output that reports through another (a count on the metrics page)."""


@dataclass(frozen=True, slots=True)
class ServerOpening:
    """What an output feeds one more driver of the run with, a fleet's server: each server
    has a driver of its own, so its own insight (the driver's, fed every snapshot before the
    sinks: its timelines are that server's requests) and its own epoch (each driver's clock
    starts at 0 when it does; noted by a sink ahead of the outputs' when an output needs it,
    :data:`WALL_CLOCK`)."""

    address: str  # as the fleet names it (its screen, its JSON lines' ``address``)
    insight: RunInsight
    epoch: RunEpoch


@dataclass(frozen=True, slots=True)
class Ending:
    """What an output is finished with: the run's insight, its last snapshot, and the other
    outputs open for it, by entry name (an export may read another's file)."""

    insight: RunInsight
    snapshot: StepSnapshot
    opened: Mapping[str, Opened]
    say: Say


@dataclass(frozen=True, slots=True)
class FromTrace:
    """What an output written from a trace gets: the trace, read once for every output,
    its path, and the insight of its snapshots (``insight()``: made on first use)."""

    path: Path
    trace: Trace
    insight: Callable[[], RunInsight]
    say: Say
    until_signal: Callable[[], AbstractContextManager[threading.Event]]
    """An event set by a signal while the block runs: for an output that serves the trace
    until its readers have it."""


@dataclass(frozen=True, slots=True, eq=False)
class Output(Generic[S]):
    """One output (see the module docstring). ``spec`` makes its spec from its flags' values
    (``None``: not asked for); the first flag is the one messages name."""

    name: str
    flags: tuple[Flag, ...]
    kind: str  # PRINTS, LIVE or END
    sources: frozenset[str]
    spec: Callable[[Values], S | None]
    needs: frozenset[str] = frozenset()
    companions: tuple[Companions, ...] = ()
    headless_only: bool = False
    refuse: Callable[[S, Asked], str | None] | None = None
    """Its own rules against the rest of the command line, past the generic ones."""
    paths: Callable[[S], Mapping[str, Path]] | None = None
    """The files it writes, by how a message names them: checked before anything starts."""
    open: Callable[[S, Opening], Opened | str] | None = None
    """Opened before the engine starts (a LIVE output's sinks, an END one's export), or the
    one line saying why it cannot be (exit 2)."""
    from_trace: Callable[[S, FromTrace], list[str]] | None = None
    """Written from a recorded trace (``--replay FILE`` without the TUI); lines of failure."""
    group: tuple[str, str] | None = None
    """The title and description of a ``--help`` group of its own (place HELP_GROUP)."""
    alone_from_trace: bool = False
    """Written from a trace, it goes alone: with ``--replay``, no ``--summary``,
    ``--compare`` or other output written from a trace beside it."""

    @property
    def flag(self) -> Flag:
        """The flag that asks for it (its companions follow)."""
        return self.flags[0]

    def given(self, values: Values) -> bool:
        """Whether its flag was given."""
        value = values.get(self.flag.dest)
        return value is not None and value is not False and value != []

    def of(self, outputs: Outputs) -> S | None:
        """Its spec in the run's outputs (``None``: not asked for)."""
        return cast("S | None", outputs.chosen.get(self.name))
