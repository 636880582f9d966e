"""A fleet whose servers come and go: the targets listed, followed, each watched while listed.

:class:`FleetMembers` is the :class:`~stepview.model.targets.Roster` of a fleet with
discoveries (a file_sd file, a Prometheus server: each a :class:`Finder`). One thread of its
own looks at each finder on the finder's own clock and, when what they list changed, makes
the fleet match: a target that appears gets its source (made by the launcher's
``make_source``, the very watch ``--attach ADDRESS`` would give it) started, one that is no
longer listed has its source stopped (its thread joined: nothing left behind), one whose labels
changed keeps its source (and its window). The fleet screen and the headless fleet only read
:meth:`~FleetMembers.members`, which is swapped whole, so they never wait on a file, the
network or a source stopping.

A finder that cannot be read (a Prometheus down, a file mid-edit) keeps the servers it listed
last, says so in :meth:`~FleetMembers.problems` (shown on the fleet screen, printed on stderr
when headless) and is asked again on its clock, until it answers. Servers given on the command
line are members from the start and never leave. A server listed twice (by a file and by
Prometheus, say) is watched once, with the labels of the first listing.

A server whose full view is on screen (``enter``) is *held*: if it leaves meanwhile, it drops
out of the list at once, but its source runs on until the view is left (:meth:`release`), so
the view is never pulled from under the user.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol

from stepview.model.errors import describe
from stepview.model.source import STOP_TIMEOUT_S, SnapshotSource
from stepview.model.targets import ListingError, Member, Target, label_text

log = logging.getLogger(__name__)

SourceMaker = Callable[[Target], SnapshotSource]
"""The launcher's: the (not started) watch of one target."""


class Finder(Protocol):
    """A discovery followed: what it lists now, asked every ``interval`` seconds."""

    name: str
    interval: float

    def poll(self) -> tuple[Target, ...] | None:
        """The targets listed now; ``None``: unchanged since the last answer. Raises
        :class:`~stepview.model.targets.ListingError` when the listing cannot be read now."""


class FleetMembers:
    """The servers ``given`` and those the ``finders`` list, each watched while listed."""

    def __init__(
        self,
        given: Sequence[Target],
        finders: Sequence[Finder],
        make_source: SourceMaker,
        *,
        stop_timeout: float = STOP_TIMEOUT_S,
    ) -> None:
        self.given = tuple(given)
        self.finders = tuple(finders)
        self._make_source = make_source
        self._stop_timeout = stop_timeout
        self._lock = threading.Lock()
        self._members: tuple[Member, ...] = ()
        self._found: dict[str, tuple[Target, ...]] = {}  # finder name -> its last answer
        self._problems: dict[str, str] = {}  # finder name -> why it cannot be read now
        self._notices: list[str] = []
        self._held: Counter[str] = Counter()
        self._retired: dict[str, SnapshotSource] = {}  # left while held: stopped on release
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepview-fleet", daemon=True)

    # -- the Roster ---------------------------------------------------------------------------

    def members(self) -> tuple[Member, ...]:
        return self._members

    def problems(self) -> tuple[str, ...]:
        """Also a listing not answered yet, and one that lists no server (a job misspelt,
        a Prometheus that scrapes no vLLM yet): the user sees why the fleet is short."""
        with self._lock:
            return tuple(
                self._problems.get(f.name)
                or (
                    f"{f.name}: asking for the servers it lists (none answered yet)"
                    if f.name not in self._found
                    else f"{f.name}: lists no server now"
                )
                for f in self.finders
                if f.name in self._problems or not self._found.get(f.name)
            )

    def notices(self) -> list[str]:
        with self._lock:
            taken, self._notices = self._notices, []
        return taken

    # -- running ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the given servers' sources, and follow the finders (on a thread)."""
        with self._lock:
            self._members = tuple(self._join(target) for target in _unique(self.given))
        if self.finders:
            self._thread.start()

    def stop(self) -> None:
        """Stop following, then stop every member's source (each thread joined)."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            # A finder's look is bounded by its timeouts (a Prometheus asked twice, 5 s each).
            self._thread.join(self._stop_timeout + 10.0)
        with self._lock:
            sources = [m.source for m in self._members] + list(self._retired.values())
            self._members, self._retired = (), {}
        for source in sources:
            source.stop(self._stop_timeout)

    @property
    def following(self) -> bool:
        """The thread that follows the finders runs."""
        return self._thread.is_alive()

    def hold(self, address: str) -> Member | None:
        """The member at ``address``, its source kept running until :meth:`release` even if
        it leaves the fleet meanwhile; ``None`` if it is no longer a member."""
        with self._lock:
            member = next((m for m in self._members if m.address == address), None)
            if member is not None:
                self._held[address] += 1
            return member

    def release(self, address: str) -> None:
        """Done with a held member: if it left meanwhile, its source stops now."""
        with self._lock:
            self._held[address] -= 1
            if self._held[address] > 0:
                return
            del self._held[address]
            source = self._retired.pop(address, None)
        if source is not None:
            source.stop(self._stop_timeout)

    # -- following ----------------------------------------------------------------------------

    def _run(self) -> None:
        due = dict.fromkeys((f.name for f in self.finders), 0.0)
        while not self._stop.is_set():
            changed = False
            for finder in self.finders:
                if due[finder.name] <= time.monotonic():
                    changed = self._look(finder) or changed
                    due[finder.name] = time.monotonic() + finder.interval
            if changed:
                self._apply()
            self._stop.wait(max(0.0, min(due.values()) - time.monotonic()))

    def _look(self, finder: Finder) -> bool:
        """Ask ``finder``; whether what it lists changed."""
        try:
            found = finder.poll()
        except Exception as exc:
            known = isinstance(exc, ListingError)
            why = str(exc) if known else f"{finder.name}: {describe(exc)}"
            if not known:
                log.exception("stepview: asking %s failed", finder.name)
            with self._lock:
                kept = self._found.get(finder.name)
                line = f"{why}; asking again every {finder.interval:g} s"
                if kept is not None:
                    line += f", keeping the {len(kept)} servers it listed"
                told = self._problems.get(finder.name)
                self._problems[finder.name] = line
                if told != line:
                    self._tell(line)
            return False
        with self._lock:
            if self._problems.pop(finder.name, None) is not None:
                self._tell(f"{finder.name}: answers again")
            if found is None or found == self._found.get(finder.name):
                if finder.name not in self._found:
                    self._found[finder.name] = ()
                    self._tell(f"{finder.name}: lists no server now")
                return False
            if not found:
                self._tell(f"{finder.name}: lists no server now")
            self._found[finder.name] = found
            return True

    def _apply(self) -> None:
        """Make the members match what is listed now: joined ones started, gone ones stopped."""
        stopping: list[SnapshotSource] = []
        with self._lock:
            if self._stop.is_set():
                return  # stop() collects what there is; nothing new may start now
            listed = [t for f in self.finders for t in self._found.get(f.name, ())]
            wanted = _unique([*self.given, *listed])
            by_address = {t.address: t for t in wanted}
            members: list[Member] = []
            for member in self._members:
                target = by_address.get(member.address)
                if target is None:
                    by = member.target.listed_by
                    self._tell(f"{member.address} left (no longer listed by {by})")
                    if self._held[member.address]:
                        self._retired[member.address] = member.source
                    else:
                        stopping.append(member.source)
                else:
                    kept = member if target == member.target else Member(target, member.source)
                    members.append(kept)
            present = {m.address for m in self._members}
            for target in wanted:
                if target.address in present:
                    continue
                try:
                    members.append(self._join(target))
                except Exception as exc:  # an address no watch can read: say so, go on
                    self._tell(f"{target.address}: cannot be watched ({describe(exc)})")
                    continue
                labels = f": {label_text(target.labels)}" if target.labels else ""
                self._tell(f"{target.address} joined (listed by {target.listed_by}{labels})")
            self._members = tuple(members)
        for source in stopping:
            source.stop(self._stop_timeout)

    def _join(self, target: Target) -> Member:
        """``target`` as a member, its source started (one that left while held and comes
        back before its view was left is the same source, running on)."""
        source = self._retired.pop(target.address, None)
        if source is None:
            source = self._make_source(target)
            source.start()
        return Member(target, source)

    def _tell(self, line: str) -> None:
        """A notice for the readers (called with the lock held), and the log."""
        log.info("%s", line)
        self._notices.append(line)


def _unique(targets: Sequence[Target]) -> list[Target]:
    """``targets`` without repeated addresses, the first of each kept."""
    seen: dict[str, Target] = {}
    for target in targets:
        seen.setdefault(target.address, target)
    return list(seen.values())
