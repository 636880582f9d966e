"""What the UI shows of an attached server: a lost link, a held view, each rank's figures.

The UI imports nothing of the engine: these are plain snapshots with the fields an attached
driver fills (``info.attached``, the DISCONNECTED state and its phase, ``ranks``), drawn by
the real app from a static source.
"""

from __future__ import annotations

from dataclasses import replace

from stepview.model.snapshot import EngineState, RankStatus
from stepview.testing.scenes import make_app
from stepview.testing.snapshots import mid_run
from stepview.ui.app import StepviewApp
from stepview.ui.dialogs.add_form import PromptForm
from stepview.ui.main.loading import LoadingView
from stepview.ui.main.status_bar import StatusBar

SIZE = (100, 24)
ADDRESS = "tcp://127.0.0.1:5570"


def status_text(app: StepviewApp) -> str:
    return str(app.query_one(StatusBar).render())


def attached_run(state: EngineState, phase: str = "", ranks: tuple[RankStatus, ...] = ()):  # type: ignore[no-untyped-def]
    snap = mid_run()
    info = replace(snap.info, model=f"tiny @ {ADDRESS}", attached=ADDRESS)
    return replace(snap, info=info, engine_state=state, phase=phase, ranks=ranks)


async def test_a_lost_server_is_named_where_the_model_was() -> None:
    message = f"DISCONNECTED from {ADDRESS} — reconnecting; 3 held as they were"
    app, _ = make_app(attached_run(EngineState.DISCONNECTED, message))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        text = status_text(app)
        first = text.splitlines()[0]
        assert first.startswith(f"⚠ {message}")
        assert first.rstrip().endswith(" step 240") and first.count("DISCONNECTED") == 1
        assert "tiny @" not in text


async def test_a_view_behind_the_server_says_how_far() -> None:
    message = "view 3 s behind the server, catching up"
    app, _ = make_app(replace(attached_run(EngineState.RUNNING, message), alerts=()))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        first = status_text(app).splitlines()[0]
        assert first.startswith(f"⚠ {message}")
        assert "RUNNING" in first and first.rstrip().endswith(" step 240")


async def test_before_the_first_record_it_says_it_is_reaching_the_server() -> None:
    hint = f"waiting for the server's records at {ADDRESS} (started with STEPVIEW_PUBLISH=…?)"
    snap = attached_run(EngineState.STARTING, hint)
    app, _ = make_app(replace(snap, step=0))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        loading = app.query_one(LoadingView)
        assert loading.border_title == "Reaching the server"
        assert hint in str(loading.render()).replace("\n", " ")


async def test_pausing_an_attached_view_says_the_server_runs_on() -> None:
    app, _ = make_app(attached_run(EngineState.PAUSED))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        first = status_text(app).splitlines()[0]
        assert f"tiny @ {ADDRESS}" in first
        assert "PAUSED view held" in first


async def test_each_rank_shows_its_own_figures() -> None:
    ranks = (RankStatus(0, True, 3, 1, 0.125), RankStatus(1, False, 2, 0, 0.5))
    app, _ = make_app(attached_run(EngineState.RUNNING, ranks=ranks))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        second = status_text(app).splitlines()[1]
        assert "r0 3/1 12%" in second and "r1 lost" in second


async def test_without_api_the_add_keys_say_why_they_do_nothing() -> None:
    app, source = make_app(attached_run(EngineState.IDLE), accepts_requests=False)
    reason = "Attached without --api: stepview can only watch."
    source.read_only = reason  # type: ignore[attr-defined]
    notices: list[str] = []
    app.notify = lambda message, **_: notices.append(message)  # type: ignore[method-assign,assignment,misc]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a", "d")
        assert not isinstance(app.screen, PromptForm)
        assert source.sent == []
        assert notices == [reason, reason]
