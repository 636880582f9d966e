"""The footer names the step view (``v``) and the latency panel (``t``) at 80 and 100 columns.

They were only on the help screen, so a newcomer never found the two views that answer "what
did this step do" and "where did the time go". On a narrow terminal the footer now leaves out
the keys a newcomer can do without, instead of cutting off help and quit at its end.
"""

from __future__ import annotations

import contextlib

from textual.pilot import Pilot
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from stepview.testing.scenes import make_app, replay_app, until
from stepview.testing.snapshots import mid_run
from stepview.ui.app import StepviewApp
from tests.ui.replay_trace import TRACE

LIVE_KEYS = ["⏎", "a", "p", "s", "d", "[", "v", "t", "/", "?", "q"]
NARROW_LIVE_KEYS = ["⏎", "a", "p", "s", "[", "v", "t", "?", "q"]
REPLAY_KEYS = ["⏎", "p", "s", "[", "v", "t", "/", "?", "q"]


def footer_keys(app: StepviewApp) -> list[str]:
    """The keys drawn whole inside the terminal's width, left to right."""
    width = app.size.width
    keys = app.screen.query_one(Footer).query(FooterKey)
    drawn = [k for k in keys if k.region.width > 0 and k.region.right <= width]
    return [k.key_display for k in sorted(drawn, key=lambda k: k.region.x)]


async def shows(app: StepviewApp, pilot: Pilot[None], expected: list[str]) -> None:
    """Wait for the footer to show ``expected`` (it is recomposed after a refresh)."""
    with contextlib.suppress(AssertionError):
        await until(pilot, lambda: footer_keys(app) == expected, timeout=3.0)
    assert footer_keys(app) == expected


async def test_a_live_run_at_100_columns_shows_every_footer_key() -> None:
    app, _ = make_app(mid_run())
    async with app.run_test(size=(100, 30)) as pilot:
        await shows(app, pilot, LIVE_KEYS)


async def test_a_live_run_at_80_columns_leaves_out_demo_and_filter_not_help_or_quit() -> None:
    app, source = make_app(mid_run())
    async with app.run_test(size=(80, 24)) as pilot:
        await shows(app, pilot, NARROW_LIVE_KEYS)
        await pilot.press("d")  # left out of the footer, not off
        assert source.sent
        await pilot.resize_terminal(100, 30)
        await shows(app, pilot, LIVE_KEYS)
        await pilot.resize_terminal(80, 24)
        await shows(app, pilot, NARROW_LIVE_KEYS)


async def test_a_replay_at_80_columns_shows_every_key_it_honours() -> None:
    app, source = replay_app(TRACE)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: source.status.count > 0 and app.shown is not None)
        await shows(app, pilot, REPLAY_KEYS)


async def test_the_detail_view_at_80_columns_offers_the_step_view_and_latency() -> None:
    app, _ = make_app(mid_run())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.shown is not None)
        await pilot.press("tab", "enter")
        await until(pilot, lambda: app.screen is not app.screen_stack[0])
        # The new screen's footer fills in over a few refreshes (bindings, recompose, layout).
        await until(pilot, lambda: {"esc", "v", "t", "?", "q"} <= set(footer_keys(app)), 5)
