"""A fleet's members as plain data: the servers to watch, their labels, and where they are listed.

A fleet given on the command line (``--attach A --attach B``) is fixed. One found where it is
listed (``--attach-file`` in Prometheus' ``file_sd`` format, ``--attach prometheus://…``)
changes while it is watched: servers join and leave. Both are a :class:`Roster`, which the
fleet screen and the headless fleet read on their own clock, as they read snapshot sources,
so that neither waits on a file or the network and neither knows which kind it reads.

A :class:`Target` is what a discovery finds (a server's address and its labels); a
:class:`Member` is a target being watched (with its running source). Labels are Prometheus'
target labels: ``job``, ``instance`` and whatever the listing adds (``zone``, ``model``...),
never the ``__`` ones, which Prometheus keeps for relabelling and drops from what it stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from stepview.model.address import FILE_SD, PROMETHEUS, Discovery, WatchAddress, watch_address
from stepview.model.source import SnapshotSource

__all__ = ["FILE_SD", "PROMETHEUS", "Discovery"]  # where they were first defined, still read

Labels = tuple[tuple[str, str], ...]
"""Label names and values, sorted by name (a tuple: hashable, compared as a whole)."""


def labels_of(mapping: dict[str, str]) -> Labels:
    """``mapping``'s labels that a target keeps (not the ``__`` ones), sorted by name."""
    return tuple(sorted((k, v) for k, v in mapping.items() if not k.startswith("__")))


class ListingError(Exception):
    """A discovery that cannot be read now (a file mid-edit, a Prometheus down): one line,
    the discovery's name first. The fleet keeps what it listed last and asks again."""


def label_text(labels: Labels) -> str:
    """``labels`` as ``name=value`` words (``job=vllm zone=a``), in one line."""
    return " ".join(f"{name}={value}" for name, value in labels)


@dataclass(frozen=True, slots=True)
class Target:
    """A server a fleet watches: ``watch`` (its ``/metrics`` page, or the plug-in's records),
    its ``labels``, and the discovery that lists it (``listed_by``, its name; ``""``: the
    command line)."""

    watch: WatchAddress
    labels: Labels = ()
    listed_by: str = ""

    @property
    def address(self) -> str:
        """The server's address as written: the fleet's key for it, and its name on screen."""
        return self.watch.text


@dataclass(frozen=True, slots=True)
class Member:
    """A :class:`Target` being watched: its source was started when it joined."""

    target: Target
    source: SnapshotSource

    @property
    def address(self) -> str:
        return self.target.address

    @property
    def labels(self) -> Labels:
        return self.target.labels


class Roster(Protocol):
    """A fleet's members as they stand, read on the reader's clock (never blocks)."""

    def members(self) -> tuple[Member, ...]:
        """Every server watched now, in the order they joined (those given first)."""

    def problems(self) -> tuple[str, ...]:
        """One line per discovery that cannot be read now (kept retrying), or not yet."""

    def notices(self) -> list[str]:
        """What changed since the last call (servers that joined or left, a discovery lost
        and back), one line each; taken out by the call."""


class FixedRoster:
    """A fleet that never changes: the addresses of the command line, or a test's sources."""

    def __init__(self, members: Sequence[Member | tuple[str, SnapshotSource]]) -> None:
        """``members``, or (address, source) pairs: a test's, or a screen's own."""
        self._members = tuple(
            member
            if isinstance(member, Member)
            else Member(Target(watch_address(member[0])), member[1])
            for member in members
        )

    def members(self) -> tuple[Member, ...]:
        return self._members

    def problems(self) -> tuple[str, ...]:
        return ()

    def notices(self) -> list[str]:
        return []
