"""Which keys apply when: the rules of ``stepview.ui.bindings``, from plain values, no app.

The pilot tests (test_app, test_history, test_replay) check a few of these through a running
app; here every combination that matters is spelled out.
"""

from __future__ import annotations

import pytest
from textual.binding import Binding, BindingType

from stepview.model.snapshot import EngineState
from stepview.ui.bindings import (
    APP_BINDINGS,
    ENGINE_BINDINGS,
    MAIN_ACTIONS,
    TIME_BINDINGS,
    Over,
    action_enabled,
)
from stepview.ui.scrub import Mode

E = EngineState
TIME = ("older", "newer", "oldest", "newest", "goto")
ENGINE = ("add", "clone", "pause", "step", "abort", "demo", "load")


def enabled(
    action: str,
    *,
    over: Over = Over.PANES,
    mode: Mode = Mode.LIVE,
    engine: EngineState = E.RUNNING,
    ready: bool = True,
) -> bool | None:
    return action_enabled(action, over=over, mode=mode, engine=engine, ready=ready)


def actions(bindings: list[BindingType]) -> set[str]:
    """The action names (no arguments) of ``bindings``, all of them :class:`Binding` objects."""
    assert all(isinstance(b, Binding) for b in bindings)
    return {b.action.split("(")[0] for b in bindings if isinstance(b, Binding)}


def test_every_main_action_has_a_key_and_the_tables_nest() -> None:
    # Fork is the detail view's key (it needs its token cursor); its rules are the app's.
    assert actions(APP_BINDINGS) | {"fork"} >= MAIN_ACTIONS
    assert all(b in APP_BINDINGS for b in [*ENGINE_BINDINGS, *TIME_BINDINGS])
    assert actions(TIME_BINDINGS) == {*TIME, "speed"}
    assert actions(ENGINE_BINDINGS) == set(ENGINE)


@pytest.mark.parametrize("action", ["interrupt", "focus_next", "focus_previous", "pop_screen"])
def test_keys_that_are_not_the_apps_to_decide_are_always_on(action: str) -> None:
    for over in Over:
        assert enabled(action, over=over, engine=E.STARTING, ready=False) is True


@pytest.mark.parametrize("mode", list(Mode))
def test_over_a_modal_every_main_key_is_hidden(mode: Mode) -> None:
    assert {enabled(a, over=Over.MODAL, mode=mode) for a in MAIN_ACTIONS} == {False}


def test_over_the_error_screen_only_quit_is_left() -> None:
    for mode in Mode:
        on = {a for a in MAIN_ACTIONS if enabled(a, over=Over.ERROR, mode=mode, engine=E.ERROR)}
        assert on == {"quit"}


def test_the_filter_belongs_to_the_panes() -> None:
    assert enabled("filter") is True
    assert enabled("filter", over=Over.DETAIL) is False
    assert enabled("help", over=Over.DETAIL) is True


def test_clone_works_over_panes_and_detail_and_fork_only_in_the_detail_view() -> None:
    assert enabled("clone") is True and enabled("clone", over=Over.DETAIL) is True
    assert enabled("fork") is False and enabled("fork", over=Over.DETAIL) is True
    assert enabled("fork", over=Over.DETAIL, engine=E.STOPPED) is None


@pytest.mark.parametrize("action", ["clone", "fork"])
def test_clone_and_fork_give_their_keys_to_read_only_in_a_replay(action: str) -> None:
    def over_detail(action: str, writable: bool) -> bool | None:
        return action_enabled(
            action,
            over=Over.DETAIL,
            mode=Mode.REPLAY,
            engine=E.IDLE,
            ready=True,
            writable=writable,
        )

    assert over_detail(action, writable=False) is False
    assert over_detail("read_only", writable=False) is True


def test_speed_is_for_replays_only() -> None:
    assert enabled("speed", mode=Mode.LIVE) is False
    assert enabled("speed", mode=Mode.HISTORY) is False
    assert enabled("speed", mode=Mode.REPLAY) is True
    assert enabled("speed", mode=Mode.REPLAY, ready=False) is None


@pytest.mark.parametrize("engine", list(EngineState))
def test_a_replay_with_a_snapshot_takes_every_playback_key_in_any_recorded_state(
    engine: EngineState,
) -> None:
    for action in (*TIME, "speed", "pause", "step"):
        assert enabled(action, mode=Mode.REPLAY, engine=engine) is True
        assert enabled(action, mode=Mode.REPLAY, engine=engine, ready=False) is None
    for action in ("add", "abort", "demo"):  # on, to say why they do nothing
        assert enabled(action, mode=Mode.REPLAY, engine=engine, ready=False) is True


def test_live_history_keys_wait_for_the_engine_and_forward_waits_for_a_look_back() -> None:
    for action in TIME:
        assert enabled(action, engine=E.STARTING) is None
        assert enabled(action, mode=Mode.HISTORY, engine=E.STARTING) is None
    assert enabled("older") is True and enabled("oldest") is True and enabled("goto") is True
    assert enabled("newer") is None and enabled("newest") is None  # live: nothing newer
    assert enabled("newer", mode=Mode.HISTORY) is True
    assert enabled("newest", mode=Mode.HISTORY) is True
    assert enabled("older", engine=E.STOPPED) is True  # a stopped run can still be looked at


@pytest.mark.parametrize("engine", [E.STARTING, E.ERROR, E.STOPPED])
def test_engine_keys_are_dimmed_without_an_engine(engine: EngineState) -> None:
    for action in ENGINE:
        assert enabled(action, engine=engine) is None
        assert enabled(action, mode=Mode.HISTORY, engine=engine) is None
    assert enabled("quit", engine=engine) is True
    assert enabled("help", engine=engine) is True


def test_single_step_only_while_paused() -> None:
    assert enabled("step", engine=E.PAUSED) is True
    for engine in (E.RUNNING, E.IDLE):
        assert enabled("step", engine=engine) is None
        assert enabled("pause", engine=engine) is True
        assert enabled("add", engine=engine) is True
