"""The specs of a run, one per concern, as the modes read them (see the package's map).

Each is plain, frozen data: what the flags said, parsed (paths as paths, addresses as
:mod:`stepview.model.address` values, the load as a :class:`~stepview.model.load.LoadSpec`).
Which flags go together is the command line's business (:mod:`stepview.cli.conflicts`): by
the time a spec exists, it is one that can run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from stepview.model.address import Discovery, MetricsUrl, WatchAddress, ZmqEndpoint
from stepview.model.load import LoadSpec
from stepview.model.recent import KEEP_FINISHED

# Where a run's steps come from: its source (:attr:`RunSpec.source`); the output registry's
# entries name the sources each output goes with.
OWN = "own"  # stepview's own engine, in the TUI or --headless (and its core in either mode)
WATCH = "watch"  # a server watched through its plug-in's records (--attach tcp:// / ipc://)
METRICS_PAGE = "metrics page"  # a server watched through its /metrics alone (--attach http://)
FLEET = "fleet"  # several servers, or a listing of them
REPLAY = "replay"  # a recorded trace (--replay FILE)
RERUN = "rerun"  # a trace's workload sent again to an engine of stepview's own

ATTACH_NICE = 10
"""``--nice``'s default: attached, stepview is a guest on the server's machine."""
SCRAPE_INTERVAL_S = 1.0
"""``--scrape-interval``'s default: how often an ``http://`` watch reads ``/metrics``."""
WINDOW_S = 60.0
"""``--window``'s default: the seconds an ``http://`` watch's percentiles cover."""
HISTORY = 2000
"""``--history``'s default: live snapshots kept for scrubbing back."""


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """An engine of stepview's own: vLLM's flags (``argv``, parsed by vLLM's parser), and
    stepview's own flag names, which vLLM's usage errors name as known (``own_flags``)."""

    argv: tuple[str, ...] = ()
    own_flags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FrontEnd:
    """How the run is shown: the TUI, or ``headless`` (``json``: one object per request);
    ``summary``: a table on stdout instead of a view (a replay's, a rerun's compare)."""

    headless: bool = False
    json: bool = False
    summary: bool = False


@dataclass(frozen=True, slots=True)
class Feed:
    """What is sent to the engine: a prompts file (``-``: standard input) and a load."""

    prompts: Path | None = None
    load: LoadSpec | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    """The run's bounds and alerts: snapshots kept, finished requests kept in memory, prompts
    admitted per step (``None``: the mode's default), when a waiting request is stuck."""

    history: int = HISTORY
    keep_finished: int = KEEP_FINISHED
    admit_per_step: int | None = None
    stuck_after: float | None = None


@dataclass(frozen=True, slots=True)
class WatchSpec:
    """A watched server or fleet: ``servers`` (parsed), the listings that add more
    (``discovery``), ``name`` (the first as given, for messages), the server's API and its
    key, the CPU priority, and a ``/metrics`` watch's scrape, window and KV events."""

    servers: tuple[WatchAddress, ...] = ()
    discovery: tuple[Discovery, ...] = ()
    name: str | None = None
    api: str | None = None
    api_key: str | None = field(default=None, repr=False)  # a secret: never shown
    nice: int | None = None
    scrape_interval: float = SCRAPE_INTERVAL_S
    window: float = WINDOW_S
    kv_events: ZmqEndpoint | None = None

    @property
    def single(self) -> WatchAddress | None:
        """The one server watched, when there is one and no fleet."""
        return self.servers[0] if len(self.servers) == 1 and not self.discovery else None

    @property
    def priority(self) -> int:
        """How far to lower stepview's CPU priority (``--nice``, else :data:`ATTACH_NICE`)."""
        return ATTACH_NICE if self.nice is None else self.nice


@dataclass(frozen=True, slots=True)
class Playback:
    """A recorded trace played (``--replay``): how fast, paused or not, compared with another."""

    path: Path
    speed: float = 1.0
    paused: bool = False
    compare: Path | None = None


@dataclass(frozen=True, slots=True)
class Rerun:
    """A trace's workload sent again (``--rerun``), ``speed`` times faster."""

    path: Path
    speed: float = 1.0


@dataclass(frozen=True, slots=True)
class Outputs:
    """What the run writes or serves: the spec of each output asked for, by its entry's name
    in the output registry (:mod:`stepview.outputs`, whose entries read their own:
    ``entry.of(outputs)``), and the log file."""

    chosen: Mapping[str, object] = field(default_factory=dict)
    log_file: Path | None = None


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One run: each concern's spec. ``replay`` / ``rerun`` are set for those sources;
    ``watch.servers`` (or ``watch.discovery``) for a watch; else the engine is stepview's."""

    engine: EngineSpec = EngineSpec()
    front: FrontEnd = FrontEnd()
    feed: Feed = Feed()
    limits: Limits = Limits()
    watch: WatchSpec = WatchSpec()
    outputs: Outputs = Outputs()
    replay: Playback | None = None
    rerun: Rerun | None = None

    @property
    def is_fleet(self) -> bool:
        """Several servers, or a listing of them that can grow: the fleet screen."""
        return len(self.watch.servers) > 1 or bool(self.watch.discovery)

    @property
    def source(self) -> str:
        """Where the run's steps come from: :data:`OWN`, :data:`WATCH`, :data:`METRICS_PAGE`,
        :data:`FLEET`, :data:`REPLAY` or :data:`RERUN`."""
        if self.replay is not None:
            return REPLAY
        if self.is_fleet:
            return FLEET
        single = self.watch.single
        if isinstance(single, MetricsUrl):
            return METRICS_PAGE
        if single is not None:
            return WATCH
        return OWN if self.rerun is None else RERUN
