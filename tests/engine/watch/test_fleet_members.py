"""A fleet whose servers come and go (FleetMembers): the members follow what is listed, joined
ones watched, gone ones stopped with nothing left behind; a listing that cannot be read keeps
its servers and says so; a server whose view is open is held until it is left.

First on scripted listings and fixed sources (the rules), then on a real file_sd file and a
fake Prometheus, with real ``/metrics`` watches of fake vLLM pages (``fake_metrics``)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stepview.engine.watch.api.server_api import ServerApi
from stepview.engine.watch.fleet.fleet_members import FleetMembers
from stepview.engine.watch.fleet.prometheus_targets import PrometheusFinder
from stepview.engine.watch.metrics.metrics_source import MetricsSource
from stepview.engine.watch.metrics.metrics_watch import MetricsWatch
from stepview.files.targets_file import FileFinder
from stepview.model.address import MetricsUrl, plugin_records, prometheus_discovery
from stepview.model.snapshot import EngineState
from stepview.model.source import SnapshotSource
from stepview.model.targets import FILE_SD, Discovery, ListingError, Target
from stepview.testing.snapshots import mid_run
from stepview.testing.sources import StaticSource
from tests.engine.watch.fake_metrics import FakeMetrics
from tests.engine.watch.fake_prometheus import FakePrometheus, Listed

LOOK_S = 0.05


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(0.01)


class Scripted:
    """A listing whose answer the test sets: ``found`` targets, or ``error`` raised."""

    def __init__(self, name: str = "listing") -> None:
        self.name = name
        self.interval = LOOK_S
        self.found: tuple[Target, ...] = ()
        self.error: str | None = None
        self.asked = 0

    def poll(self) -> tuple[Target, ...] | None:
        self.asked += 1
        if self.error is not None:
            raise ListingError(self.error)
        return self.found


class Made:
    """The sources made for targets, by address (a fresh fixed source each)."""

    def __init__(self) -> None:
        self.sources: dict[str, list[StaticSource]] = {}

    def __call__(self, target: Target) -> SnapshotSource:
        source = StaticSource(mid_run())
        self.sources.setdefault(target.address, []).append(source)
        return source


def addresses(fleet: FleetMembers) -> list[str]:
    return [member.address for member in fleet.members()]


def test_members_follow_the_listing_and_the_given_ones_stay() -> None:
    listing, made = Scripted(), Made()
    a, b, c = (Target(MetricsUrl(f"http://{n}:8000"), (("zone", n),), "listing") for n in "abc")
    listing.found = (a, b)
    fleet = FleetMembers([Target(plugin_records("tcp://given:5570"))], [listing], made)
    fleet.start()
    try:
        eventually(lambda: addresses(fleet) == ["tcp://given:5570", a.address, b.address])
        assert all(s[0].alive for s in made.sources.values())
        assert fleet.notices() == [
            "http://a:8000 joined (listed by listing: zone=a)",
            "http://b:8000 joined (listed by listing: zone=b)",
        ]
        assert fleet.problems() == ()
        # b's labels change (same source, its window kept); a leaves (stopped); c joins.
        b_moved = Target(b.watch, (("zone", "b2"),), "listing")
        listing.found = (b_moved, c)
        eventually(lambda: addresses(fleet) == ["tcp://given:5570", b.address, c.address])
        eventually(lambda: made.sources[a.address][0].stopped)
        assert len(made.sources[b.address]) == 1 and fleet.members()[1].labels == (("zone", "b2"),)
        assert fleet.notices() == [
            "http://a:8000 left (no longer listed by listing)",
            "http://c:8000 joined (listed by listing: zone=c)",
        ]
        # The given server is never dropped, even by a listing that names it and lets go.
        listing.found = (Target(plugin_records("tcp://given:5570"), (), "listing"),)
        eventually(lambda: addresses(fleet) == ["tcp://given:5570"])
        assert not made.sources["tcp://given:5570"][0].stopped
    finally:
        fleet.stop()
    assert not fleet.following
    assert all(s.stopped for each in made.sources.values() for s in each)


def test_a_listing_that_cannot_be_read_keeps_its_servers_and_says_so_once() -> None:
    listing, made = Scripted("prometheus://p:9090"), Made()
    listing.found = (Target(MetricsUrl("http://a:8000")), Target(MetricsUrl("http://b:8000")))
    fleet = FleetMembers([], [listing], made)
    assert fleet.problems() == (
        "prometheus://p:9090: asking for the servers it lists (none answered yet)",
    )
    fleet.start()
    try:
        eventually(lambda: len(fleet.members()) == 2)
        fleet.notices()
        listing.error = "prometheus://p:9090: cannot reach it (connection refused)"
        eventually(lambda: fleet.problems() != ())
        line = (
            "prometheus://p:9090: cannot reach it (connection refused); asking again every "
            "0.05 s, keeping the 2 servers it listed"
        )
        assert fleet.problems() == (line,)
        asked = listing.asked
        eventually(lambda: listing.asked > asked + 3)  # asked again, and again
        assert fleet.notices() == [line]  # said once, not at every look
        assert len(fleet.members()) == 2 and not any(s[0].stopped for s in made.sources.values())
        listing.error = None
        eventually(lambda: fleet.problems() == ())
        assert fleet.notices() == ["prometheus://p:9090: answers again"]
    finally:
        fleet.stop()


def test_a_listing_of_no_server_says_so() -> None:
    """A job misspelt, a Prometheus that scrapes no vLLM yet: the user sees why it is empty."""
    listing, made = Scripted("prometheus://p:9090?job=vlm"), Made()
    fleet = FleetMembers([], [listing], made)
    fleet.start()
    try:
        eventually(
            lambda: fleet.problems() == ("prometheus://p:9090?job=vlm: lists no server now",)
        )
        assert fleet.notices() == ["prometheus://p:9090?job=vlm: lists no server now"]
        listing.found = (Target(MetricsUrl("http://a:8000")),)
        eventually(lambda: fleet.problems() == ())
    finally:
        fleet.stop()


def test_a_server_whose_view_is_open_runs_on_after_it_left_until_the_view_is_left() -> None:
    listing, made = Scripted(), Made()
    a = Target(MetricsUrl("http://a:8000"))
    listing.found = (a,)
    fleet = FleetMembers([], [listing], made)
    fleet.start()
    try:
        eventually(lambda: addresses(fleet) == [a.address])
        held = fleet.hold(a.address)
        assert held is not None
        listing.found = ()
        eventually(lambda: addresses(fleet) == [])
        assert not held.source.stopped  # type: ignore[attr-defined]
        fleet.release(a.address)
        assert held.source.stopped  # type: ignore[attr-defined]
        assert fleet.hold(a.address) is None  # gone: the launcher shows the fleet again
        # Back while held: the same source, running on.
        listing.found = (a,)
        eventually(lambda: addresses(fleet) == [a.address])
        again = fleet.hold(a.address)
        assert again is not None
        listing.found = ()
        eventually(lambda: addresses(fleet) == [])
        listing.found = (a,)
        eventually(lambda: addresses(fleet) == [a.address])
        assert fleet.members()[0].source is again.source
        fleet.release(a.address)
        assert not again.source.stopped  # type: ignore[attr-defined]
    finally:
        fleet.stop()


# -- a real file and a fake Prometheus, watched through /metrics ------------------------------


@pytest.fixture
def pages(fake_metrics: FakeMetrics) -> Iterator[list[FakeMetrics]]:
    """Three fake vLLM servers (their /metrics real captures)."""
    more = [FakeMetrics(), FakeMetrics()]
    for page in more:
        page.start()
    yield [fake_metrics, *more]
    for page in more:
        page.stop()


def watch(target: Target) -> SnapshotSource:
    """What the launcher gives a discovered server: the /metrics watch."""
    return MetricsSource(MetricsWatch(ServerApi(target.address)), interval=0.1, history=1)


def fleet_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name in ("stepview-metrics", "stepview-fleet")}


def up(fleet: FleetMembers, count: int) -> Callable[[], bool]:
    """The fleet has ``count`` members, each scraped (idle, as the capture says)."""

    def check() -> bool:
        members = fleet.members()
        states = [m.source.latest().engine_state for m in members]
        return len(members) == count and all(s is EngineState.IDLE for s in states)

    return check


def test_a_file_changed_while_watching_adds_and_removes_servers(
    pages: list[FakeMetrics], tmp_path: Path
) -> None:
    a, b, c = pages
    path = tmp_path / "targets.json"

    def listing(*servers: FakeMetrics) -> None:
        groups = [{"targets": [f"127.0.0.1:{s.port}" for s in servers], "labels": {"job": "vllm"}}]
        path.with_suffix(".new").write_text(json.dumps(groups))
        os.replace(path.with_suffix(".new"), path)

    listing(a, b)
    before = fleet_threads()
    fleet = FleetMembers(
        [], [FileFinder(Discovery(FILE_SD, str(path), "targets.json"), 0.05)], watch
    )
    fleet.start()
    try:
        eventually(up(fleet, 2))
        assert addresses(fleet) == [a.url, b.url]
        assert all(m.labels == (("job", "vllm"),) for m in fleet.members())
        gone = fleet.members()[0].source
        listing(b, c)
        eventually(lambda: addresses(fleet) == [b.url, c.url])
        eventually(up(fleet, 2))
        eventually(lambda: not gone.alive)  # a's watch stopped: its thread ended
        assert fleet.notices() == [
            f"{a.url} joined (listed by targets.json: job=vllm)",
            f"{b.url} joined (listed by targets.json: job=vllm)",
            f"{a.url} left (no longer listed by targets.json)",
            f"{c.url} joined (listed by targets.json: job=vllm)",
        ]
    finally:
        fleet.stop()
    assert fleet_threads() <= before  # nothing left behind


def test_prometheus_targets_come_and_go_and_a_prometheus_down_keeps_them(
    pages: list[FakeMetrics], fake_prometheus: FakePrometheus
) -> None:
    a, b, c = pages
    listed = {
        s.url: Listed(f"{s.url}/metrics", labels={"zone": n})
        for s, n in zip(pages, "abc", strict=True)
    }
    fake_prometheus.targets = [listed[a.url], listed[b.url]]
    finder = PrometheusFinder(prometheus_discovery(f"{fake_prometheus.address}?job=vllm"), 0.05)
    fleet = FleetMembers([], [finder], watch)
    fleet.start()
    try:
        eventually(up(fleet, 2))
        assert [dict(m.labels)["zone"] for m in fleet.members()] == ["a", "b"]
        fake_prometheus.targets = [listed[b.url], listed[c.url]]
        eventually(lambda: addresses(fleet) == [b.url, c.url])
        eventually(up(fleet, 2))
        fake_prometheus.stop()
        # (a look under way as it stops may find its connection reset first)
        eventually(lambda: "refused" in "".join(fleet.problems()))
        assert fleet.problems() == (
            f"{fake_prometheus.address}?job=vllm: cannot reach it (connection refused); asking "
            "again every 0.05 s, keeping the 2 servers it listed",
        )
        assert addresses(fleet) == [b.url, c.url]  # still watched, each on its own
        fake_prometheus.start()  # back, on the same port
        eventually(lambda: fleet.problems() == ())
        assert f"{fake_prometheus.address}?job=vllm: answers again" in fleet.notices()
    finally:
        fleet.stop()
