"""``x`` aborts the request the user chose, once, and says what became of it (issue 13, case 6).

Pressing ``x`` several times quickly on the Running pane used to abort other requests: the
selection moved to the next row as the aborted one left, "abort sent for r006" appeared
twice, and r006 then finished normally without a word.
"""

from __future__ import annotations

from dataclasses import replace

from stepview.model.commands import Abort
from stepview.model.grow import Frozen
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, RequestView, StepSnapshot, Timings
from stepview.testing.scenes import make_app, until
from stepview.testing.snapshots import mid_run
from stepview.ui.main.aborts import AbortTracker, Notice
from stepview.ui.main.request_table import RequestTable


def view(request_id: str, state: RequestState) -> RequestView:
    return RequestView(request_id, "p", SamplingSpec(), state, Timings(0.0))


def snapshot(*finished: RequestView, active: tuple[RequestView, ...] = ()) -> StepSnapshot:
    return StepSnapshot(
        step=1,
        clock=1.0,
        engine_state=EngineState.RUNNING,
        active=active,
        finished=Frozen(list(finished)),
    )


def test_one_abort_per_request_and_none_without_a_choice() -> None:
    tracker = AbortTracker()
    running = view("r6", RequestState.DECODING)
    assert tracker.ask(running) == ("r6", Notice("abort sent for r6"))
    assert tracker.ask(running) == (None, Notice("abort already sent for r6", warning=True))
    assert tracker.ask(None) == (None, Notice("No request selected.", warning=True))
    done = view("r1", RequestState.FINISHED)
    assert tracker.ask(done) == (None, Notice("r1 is already finished.", warning=True))
    assert tracker.pending == ("r6",)


def test_the_outcome_is_told_once_the_request_is_final() -> None:
    tracker = AbortTracker()
    for request_id in ("r6", "r7", "r8"):
        tracker.ask(view(request_id, RequestState.DECODING))
    still = snapshot(active=(view("r6", RequestState.DECODING),))
    assert tracker.settle(still) == []
    raced = snapshot(
        view("r6", RequestState.FINISHED),
        view("r7", RequestState.ABORTED),
        active=(view("r8", RequestState.DECODING),),
    )
    assert tracker.settle(raced) == [
        Notice("r6 already finished before the abort reached the engine", warning=True),
        Notice("r7 aborted"),
    ]
    assert tracker.pending == ("r8",)
    assert tracker.settle(raced) == []  # told once


async def test_repeated_x_aborts_the_chosen_request_once_and_no_other() -> None:
    snap = mid_run()
    app, source = make_app(snap)
    notices: list[str] = []
    app.notify = lambda message, **_: notices.append(message)  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        running = app.query_one("#running", RequestTable)
        await pilot.press("down", "x", "x", "x")  # u1, pressed three times before it left
        assert source.sent == [Abort("u1")]
        assert notices == ["abort sent for u1"] + ["abort already sent for u1"] * 2
        # The engine had finished u1 in the step that was running: it never saw the abort.
        u1 = next(v for v in snap.active if v.request_id == "u1")
        after = replace(
            snap,
            step=snap.step + 1,
            active=tuple(v for v in snap.active if v.request_id != "u1"),
            finished=Frozen([*snap.finished, u1._replace(state=RequestState.FINISHED)]),
        )
        source.snapshot = after
        await until(pilot, lambda: app.shown is after)
        assert notices[-1] == "u1 already finished before the abort reached the engine"
        # u3 slid up under the cursor, but nobody chose it: x aborts nothing.
        assert running.selected is None
        await pilot.press("x")
        assert source.sent == [Abort("u1")] and notices[-1] == "No request selected."
        await pilot.press("down", "x")  # now the user chose it
        assert source.sent == [Abort("u1"), Abort("u3")]
