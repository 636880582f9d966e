"""The fleet screen at 64 servers: ``s`` sorts by a column, ``/`` filters by address or label,
Esc gives every server back, and the cursor stays on its server (Enter opens the one chosen)
through sorts, filters, refreshes and servers joining and leaving."""

from __future__ import annotations

import re
from dataclasses import replace

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from stepview.insight.fleet_order import SORTS
from stepview.testing.fleet_scene import CROWD, crowd, crowd_address, crowd_member
from stepview.testing.sources import StaticSource
from stepview.ui.fleet.fleet_app import FleetApp
from tests.ui.fleet.test_fleet_members_app import Changing

SIZE = (120, 40)
FIRST = {  # each sort's first server (stepview.testing.fleet_scene.crowd_figures)
    "listed": crowd_address(CROWD - 1),
    "server": crowd_address(0),
    "waiting": crowd_address(9),
    "KV": crowd_address(59),
    "tok/s": crowd_address(29),
    "TTFT p99": crowd_address(37),
}


def title(app: FleetApp) -> str:
    return str(app.query_one("#fleet-title", Static).render())


def shown(app: FleetApp) -> list[str]:
    """The servers on screen, top to bottom, as the table holds them (a sort moves the
    table's rows in place: they must follow the app's order)."""
    table = app.query_one(DataTable)
    firsts = [str(table.get_row_at(number)[0]) for number in range(table.row_count)]
    drawn = [first.split("\n")[0][2:] for first in firsts if "└ rank" not in first]
    assert drawn == [row.address for row in app.rows]
    return drawn


def number(address: str) -> int:
    """The crowd's index of the server at ``address`` (``gpu-NN``)."""
    found = re.search(r"gpu-(\d+)", address)
    assert found is not None
    return int(found.group(1))


def under_cursor(app: FleetApp) -> str:
    return app._owners[app.query_one(DataTable).cursor_row]


async def type_filter(pilot: Pilot[str | None], text: str) -> None:
    await pilot.press("slash", *text)
    await pilot.pause()


async def test_each_sort_puts_its_worst_server_first_and_the_title_says_which() -> None:
    app = FleetApp(crowd(), window=60.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.sort == "listed" and "· by " not in title(app)
        assert len(shown(app)) == CROWD
        for sort in SORTS[1:]:
            await pilot.press("s")
            assert app.sort == sort
            assert shown(app)[0] == FIRST[sort], sort
            assert f"· by {sort} ·" in title(app)
            assert under_cursor(app) == crowd_address(CROWD - 1)  # where it was: the first listed
        assert sorted(shown(app)) == sorted(crowd_address(i) for i in range(CROWD))
        await pilot.press("s")  # round again: as listed
        assert app.sort == "listed" and shown(app)[0] == FIRST["listed"]


async def test_a_sort_by_a_figure_is_worst_first_with_unknown_figures_last() -> None:
    app = FleetApp(crowd(), window=60.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press(*["s"] * SORTS.index("TTFT p99"))
        p99 = [row.ttft_p99 for row in app.rows]
        known = [value for value in p99 if value is not None]
        assert known == sorted(known, reverse=True)
        assert p99[: len(known)] == known  # those without one (none finished yet) at the end


async def test_the_filter_narrows_the_rows_as_typed_and_esc_gives_every_server_back() -> None:
    app = FleetApp(crowd(), window=60.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await type_filter(pilot, "zone=z1")
        assert len(shown(app)) == CROWD // 4
        assert all(number(address) % 4 == 1 for address in shown(app))
        assert "16 match “zone=z1”" in title(app)
        # The plug-in server gpu-41 is in zone z1: its two rank rows come with it.
        assert app.query_one(DataTable).row_count == CROWD // 4 + 2
        await pilot.press("escape")  # in the bar: cleared
        await pilot.pause()
        assert len(shown(app)) == CROWD and "match" not in title(app)
        assert app.focused is app.query_one(DataTable)
        # Enter keeps the filter and gives the table the focus; Esc there clears it too.
        await type_filter(pilot, "GPU-1")  # any case, address text
        await pilot.press("enter")
        await pilot.pause()
        assert app.is_running and app.focused is app.query_one(DataTable)
        assert shown(app) == [crowd_address(i) for i in (19, 18, 17, 16, 15, 14, 13, 12, 11, 10)]
        await pilot.press("escape")
        await pilot.pause()
        assert len(shown(app)) == CROWD


async def test_enter_after_a_sort_and_a_filter_opens_the_server_under_the_cursor() -> None:
    app = FleetApp(crowd(), window=60.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await type_filter(pilot, "zone=z1")
        await pilot.press("enter")  # keep it; the table has the focus
        await pilot.press(*["s"] * SORTS.index("KV"))
        # zone z1's fullest KV caches: gpu-49 (61/64), then gpu-29 (57/64).
        assert shown(app)[:2] == [crowd_address(49), crowd_address(29)]
        await pilot.press("home", "down")
        await pilot.press("enter")
    assert app.return_value == crowd_address(29)


async def test_the_cursor_stays_on_its_server_when_a_refresh_reorders_the_rows() -> None:
    members = crowd()
    app = FleetApp(members, window=60.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("s", "s")  # by waiting: gpu-09 first
        await pilot.press("home", "down", "down")
        chosen = under_cursor(app)
        assert shown(app).index(chosen) == 2
        source = next(m.source for m in members if m.address == chosen)
        assert isinstance(source, StaticSource)
        counters = replace(source.snapshot.counters, waiting=999)
        source.snapshot = replace(source.snapshot, counters=counters)  # now it waits most
        app.poll()
        await pilot.pause()
        assert shown(app)[0] == chosen and under_cursor(app) == chosen
        await pilot.press("enter")
    assert app.return_value == chosen


async def test_servers_that_join_and_leave_while_filtered_show_only_if_they_match() -> None:
    roster = Changing(*crowd())
    app = FleetApp(roster, window=60.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await type_filter(pilot, "zone=z2")
        await pilot.press("enter")
        await pilot.press("down", "down")
        chosen = under_cursor(app)  # gpu-54 (listed last first: 62, 58, 54, ...)
        assert chosen == crowd_address(54)
        # A server joins in zone z2, one in z3; one of z2 leaves.
        joined, elsewhere = crowd_member(66, 68), crowd_member(67, 68)  # zones z2 and z3
        roster.listed = [
            joined,
            elsewhere,
            *(m for m in roster.listed if m.address != crowd_address(58)),
        ]
        app.poll()
        await pilot.pause()
        assert joined.address in shown(app) and elsewhere.address not in shown(app)
        assert crowd_address(58) not in shown(app)
        assert len(shown(app)) == CROWD // 4  # one in, one out
        assert "65 servers" in title(app) and "16 match “zone=z2”" in title(app)
        assert under_cursor(app) == chosen
        # The server under the cursor leaves: the cursor stays on a server that matches.
        roster.listed = [m for m in roster.listed if m.address != chosen]
        app.poll()
        await pilot.pause()
        assert under_cursor(app) in shown(app) and chosen not in shown(app)
        await pilot.press("escape")
        await pilot.pause()
        assert len(shown(app)) == 64  # every server the roster has now, z3's newcomer too
        assert elsewhere.address in shown(app)


async def test_letters_typed_in_the_filter_are_text_not_keys() -> None:
    """``s`` and ``q`` are the fleet's keys, and ←/→ scroll its columns: in the bar they
    are what the user types, and where the text cursor moves."""
    app = FleetApp(crowd(), window=60.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await type_filter(pilot, "qs")
        assert app.is_running and app.sort == "listed" and app.filter == "qs"
        await pilot.press("left", "x")
        await pilot.pause()
        assert app.filter == "qxs" and shown(app) == []
        assert "0 match “qxs”" in title(app)


async def test_a_fleet_screen_starts_in_the_sort_it_is_given() -> None:
    """The launcher makes a fleet screen anew after a server's view: Esc there comes back to
    the order the user had chosen (it came back as listed), the cursor on the server left."""
    sort = SORTS[2]
    app = FleetApp(crowd(), window=60.0, cursor=crowd_address(5), sort=sort)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.sort == sort and f"· by {sort} ·" in title(app)
        assert shown(app)[0] == FIRST[sort]
        assert under_cursor(app) == crowd_address(5)
