"""The fleet screen on fake sources: rows, marks, a server down and back, Enter and Esc."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import DataTable

from stepview.model.commands import Pause
from stepview.model.server_window import Latency, ServerWindow
from stepview.model.snapshot import (
    EngineCounters,
    EngineInfo,
    EngineState,
    RankStatus,
    StepSnapshot,
)
from stepview.testing.snapshots import mid_run
from stepview.testing.sources import StaticSource
from stepview.ui.fleet.fleet_app import FleetApp
from stepview.ui.fleet.server_app import BACK, QUIT, FleetServerApp
from stepview.ui.main.request_table import RequestTable

HTTP, TCP = "http://10.0.0.1:8000", "tcp://10.0.0.2:5570"


def scraped(waiting: int, kv: float, state: EngineState = EngineState.RUNNING) -> StepSnapshot:
    return StepSnapshot(
        step=9,
        clock=9.0,
        engine_state=state,
        info=EngineInfo(model=f"tiny @ {HTTP}", attached=HTTP, detailed_states=False),
        counters=EngineCounters(running=2, waiting=waiting, kv_cache_usage=kv),
        server=ServerWindow(
            HTTP, 60.0, 9.0, (Latency("ttft", 0.05, 0.09, 0.2, 4),), (("capacity", waiting),)
        ),
    )


def plugin(waiting: int = 0) -> StepSnapshot:
    base = mid_run()
    return replace(
        base,
        info=replace(base.info, model=f"tiny @ {TCP}", attached=TCP),
        counters=replace(base.counters, waiting=waiting, kv_cache_usage=0.1),
        ranks=(RankStatus(0, True, 2, 0, 0.1), RankStatus(1, False)),
    )


def table_rows(app: FleetApp) -> list[list[str]]:
    table = app.query_one(DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_rows_marks_and_a_server_down_and_back() -> None:
    metrics, published = StaticSource(scraped(9, 0.9)), StaticSource(plugin(0))
    app = FleetApp([(HTTP, metrics), (TCP, published)], window=60.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        rows = table_rows(app)
        # The /metrics server, then the plug-in server and its two ranks.
        assert [row[0] for row in rows] == [f"▲ {HTTP}", f"▼ {TCP}", "  └ rank 0", "  └ rank 1"]
        assert rows[0][1:7] == ["running", "tiny", "2", "9 (capacity 9)", "90%", "-"]
        assert rows[0][7:] == ["50ms", "200ms", "0.0"]
        assert rows[3][1] == "down"  # rank 1 publishes nothing
        # The busy server goes down: it takes no part in the rule, nobody is marked.
        metrics.snapshot = scraped(9, 0.9, EngineState.DISCONNECTED)
        app.poll()
        rows = table_rows(app)
        assert rows[0][1] == "down" and [row[0][0] for row in rows[:2]] == [" ", " "]
        assert "1 up" in str(app.query_one("#fleet-title").render())
        metrics.snapshot = scraped(9, 0.9)  # back
        app.poll()
        assert table_rows(app)[0][:2] == [f"▲ {HTTP}", "running"]


async def test_balanced_servers_are_not_marked() -> None:
    app = FleetApp(
        [(HTTP, StaticSource(scraped(1, 0.2))), (TCP, StaticSource(plugin(0)))], window=60.0
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert [row[0][0] for row in table_rows(app)[:2]] == [" ", " "]


async def test_enter_opens_the_server_under_the_cursor_even_from_its_rank_row() -> None:
    app = FleetApp(
        [(HTTP, StaticSource(scraped(0, 0.1))), (TCP, StaticSource(plugin()))], window=60.0
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("down", "down")  # rank 0 of the plug-in server
        await pilot.press("enter")
    assert app.return_value == TCP  # the server's address: the fleet may change meanwhile


async def test_q_leaves_the_fleet_without_a_server() -> None:
    app = FleetApp([(HTTP, StaticSource(scraped(0, 0.1)))], window=60.0, cursor=HTTP)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("q")
    assert app.return_value is None


async def test_a_server_view_runs_on_the_borrowed_source_and_esc_goes_back() -> None:
    source = StaticSource(plugin(), accepts_requests=False)
    source.started = True  # the fleet's: running before the view and after it
    app = FleetServerApp(source)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        # The full single-server view: the plug-in's requests in their panes.
        assert app.query_one("#running", RequestTable).row_count > 0
        await pilot.press("p")
        await pilot.press("escape")
    assert app.leaving == BACK
    assert source.sent == [Pause()] and not source.stopped  # the view never stops it


async def test_q_in_a_server_view_quits_the_fleet() -> None:
    source = StaticSource(scraped(0, 0.1), accepts_requests=False)
    app = FleetServerApp(source)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("q")
    assert app.leaving == QUIT and not source.stopped


async def test_a_narrow_terminal_scrolls_to_the_last_columns_and_stays_there() -> None:
    """At 80 columns the table is wider than the screen: → scrolls it (the footer says so),
    and the twice-a-second refresh of its figures leaves it where the user put it."""
    metrics, published = StaticSource(scraped(9, 0.9)), StaticSource(plugin(0))
    app = FleetApp([(HTTP, metrics), (TCP, published)], window=60.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.query_one(DataTable)
        assert table.max_scroll_x > 0
        assert app.screen.active_bindings["left"].binding.description == "Columns"
        for _ in range(40):
            await pilot.press("right")
        await pilot.wait_for_scheduled_animations()
        assert table.scroll_x == table.max_scroll_x
        metrics.snapshot = scraped(3, 0.5)  # new figures, same rows
        app.poll()
        await pilot.pause()
        assert table.scroll_x == table.max_scroll_x
        assert table_rows(app)[0][4] == "3 (capacity 3)"
        for _ in range(40):
            await pilot.press("left")
        await pilot.wait_for_scheduled_animations()
        assert table.scroll_x == 0


async def test_a_cell_that_grows_in_place_widens_its_column() -> None:
    """Rows are updated in place (the table keeps its scroll): a server going from idle to
    running, or its waiting from 0 to 9, must not be cut to the width the first poll had."""
    source = StaticSource(scraped(0, 0.0, EngineState.IDLE))
    app = FleetApp([(HTTP, source)], window=60.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        table = app.query_one(DataTable)
        assert table_rows(app)[0][1] == "idle"
        source.snapshot = scraped(9, 0.9)
        app.poll()
        await pilot.pause()
        state, waiting = table.ordered_columns[1], table.ordered_columns[4]
        assert state.content_width >= len("running")
        assert waiting.content_width >= len("9 (capacity 9)")


async def test_a_server_s_text_that_looks_like_markup_shows_as_it_is() -> None:
    """A model name and labels are another party's text: the table read a ``str`` cell as
    markup, and ``[/x]`` in a served model's name ended the fleet screen (MarkupError)."""
    named = "evil[/x] [reverse]r[/reverse] [@click=app.quit]q[/]"
    snapshot = scraped(0, 0.1)
    source = StaticSource(replace(snapshot, info=replace(snapshot.info, model=f"{named} @ {HTTP}")))
    members = [(HTTP, source), (TCP, StaticSource(plugin(0)))]
    app = FleetApp(members, window=60.0)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        assert table_rows(app)[0][2] == named
        await pilot.press("s")  # sorted: the rows move, the text with them
        await pilot.pause()
        assert [row[2] for row in table_rows(app) if row[0].endswith(HTTP)] == [named]
