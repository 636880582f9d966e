"""The fleet screen on a fleet that changes (a roster read on each poll): servers join and leave
as rows, the cursor stays on its server, labels under the address, a listing that cannot be
read said above the table, joins and leaves notified, Enter still opens the server."""

from __future__ import annotations

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from stepview.model.address import watch_address
from stepview.model.targets import Member, Target
from stepview.testing.sources import StaticSource
from stepview.ui.fleet.fleet_app import NO_SERVER, FleetApp
from tests.ui.fleet.test_fleet_app import scraped, table_rows

A, B, C = "http://10.0.0.1:8000", "http://10.0.0.2:8000", "http://10.0.0.3:8000"
PROM = "prometheus://prom:9090"


def member(address: str, **labels: str) -> Member:
    return Member(
        Target(watch_address(address), tuple(sorted(labels.items())), PROM),
        StaticSource(scraped(1, 0.2)),
    )


class Changing:
    """A roster the test changes between polls."""

    def __init__(self, *members: Member) -> None:
        self.listed = list(members)
        self.trouble: tuple[str, ...] = ()
        self.told: list[str] = []

    def members(self) -> tuple[Member, ...]:
        return tuple(self.listed)

    def problems(self) -> tuple[str, ...]:
        return self.trouble

    def notices(self) -> list[str]:
        taken, self.told = self.told, []
        return taken


async def notified(app: FleetApp, pilot: Pilot[str | None], count: int) -> list[str]:
    """The notifications' messages once there are ``count`` (each is a message the app
    handles in its turn, later on a loaded machine)."""
    for _ in range(200):
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        if len(messages) >= count:
            break
    return messages


def problem_line(app: FleetApp) -> str | None:
    line = app.query_one("#fleet-problem", Static)
    return str(line.render()) if line.display else None


async def test_rows_follow_the_members_and_the_cursor_stays_on_its_server() -> None:
    roster = Changing(member(A, instance="10.0.0.1:8000", job="vllm", zone="a"), member(B))
    app = FleetApp(roster, window=60.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        rows = table_rows(app)
        # The labels on a dim second line; instance only repeated the address: left out.
        assert [row[0] for row in rows] == [f"  {A}\n  job=vllm zone=a", f"  {B}"]
        assert problem_line(app) is None
        await pilot.press("down")  # on B
        roster.listed = [member(C, zone="c"), *roster.listed[1:], member(A)]
        roster.told = [f"{C} joined (listed by {PROM}: zone=c)"]
        app.poll()
        assert await notified(app, pilot, 1) == [f"{C} joined (listed by {PROM}: zone=c)"]
        assert [row[0].split("\n")[0] for row in table_rows(app)] == [f"  {C}", f"  {B}", f"  {A}"]
        assert app.query_one(DataTable).cursor_row == 1  # still B
        roster.listed = [roster.listed[1]]  # C and A left
        app.poll()
        await pilot.pause()
        assert [row[0] for row in table_rows(app)] == [f"  {B}"]
        assert "1 servers, 1 up" in str(app.query_one("#fleet-title", Static).render())
        await pilot.press("enter")
    assert app.return_value == B


async def test_a_listing_in_trouble_or_none_yet_is_said_above_the_table() -> None:
    roster = Changing()
    app = FleetApp(roster, window=60.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert problem_line(app) == NO_SERVER
        await pilot.press("enter")  # no row: nothing to open, the fleet stays
        assert app.is_running
        roster.trouble = (f"{PROM}: cannot reach it (connection refused); asking again every 5 s",)
        app.poll()
        await pilot.pause()
        assert problem_line(app) == roster.trouble[0]
        roster.trouble, roster.listed = (), [member(A)]
        app.poll()
        await pilot.pause()
        assert problem_line(app) is None and len(table_rows(app)) == 1


async def test_long_labels_are_cut_so_the_table_stays_readable_at_80_columns() -> None:
    many = {f"label{i}": f"value{i}" for i in range(8)}
    roster = Changing(member(A, **many))
    app = FleetApp(roster, window=60.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        _, labels = table_rows(app)[0][0].split("\n")
        assert labels.startswith("  label0=value0 label1=value1") and labels.endswith("…")
        assert len(labels) <= len("  ") + 32
        server = app.query_one(DataTable).ordered_columns[0]
        assert server.content_width <= 2 + 32


async def test_many_changes_at_once_are_counted_not_each_notified() -> None:
    roster = Changing()
    app = FleetApp(roster, window=60.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        roster.listed = [member(f"http://10.0.1.{i}:8000") for i in range(12)]
        roster.told = [f"{m.address} joined (listed by {PROM})" for m in roster.listed]
        app.poll()
        assert await notified(app, pilot, 3) == [
            f"http://10.0.1.0:8000 joined (listed by {PROM})",
            f"http://10.0.1.1:8000 joined (listed by {PROM})",
            "and 10 more changes (the log has each)",
        ]
        assert len(table_rows(app)) == 12
