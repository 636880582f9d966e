"""The panes' rows of a snapshot, sorted chunk by chunk: what each pane gets, and what it costs.

:class:`~stepview.ui.main.chunk_filter.ChunkFilter` must give each pane exactly what
``StepSnapshot.pane`` gives it, for snapshots shown in any order (the screen skips most of a fast
engine's snapshots, and the history keys go back and forth), while testing only the requests
of chunks it has not seen. Work is counted (the views handed to the tests), never timed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from stepview.model.active import CHUNK, ActiveBuilder, ActiveViews
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState, RequestView, Timings
from stepview.ui.main.chunk_filter import ChunkFilter, Select
from stepview.ui.main.panes import _in_pane

S = RequestState


def view(request_id: str, state: RequestState, tokens: int = 0) -> RequestView:
    return RequestView(
        request_id, f"prompt {request_id}", SamplingSpec(), state, Timings(0.0), tokens
    )


class Counted:
    """A pane's select that counts the views it is handed."""

    def __init__(self, select: Select) -> None:
        self.select = select
        self.views = 0

    def __call__(self, views: Sequence[RequestView]) -> Iterator[RequestView]:
        self.views += len(views)
        return self.select(views)


def panes() -> tuple[ChunkFilter, Counted, Counted]:
    pending, running = Counted(_in_pane("pending")), Counted(_in_pane("running"))
    return ChunkFilter(pending, running), pending, running


def run_of(steps: int, seed: int) -> list[ActiveViews]:
    """A driver's run, seeded: requests arrive, wait, get scheduled, decode, get preempted and
    finish; one frozen snapshot of the active ones per step."""
    rng = random.Random(seed)
    builder = ActiveBuilder()
    live: dict[str, RequestView] = {}
    frozen = []
    for step in range(steps):
        for _ in range(rng.randrange(4)):
            new = view(f"q{step}-{len(live)}", rng.choice([S.PENDING, S.WAITING]))
            builder.append(new)
            live[new.request_id] = new
        for request_id in rng.sample(sorted(live), min(len(live), 6)):
            old = live[request_id]
            move = rng.random()
            if move < 0.2:
                builder.remove(old)
                del live[request_id]
                continue
            state: RequestState
            if old.state in (S.PENDING, S.WAITING, S.PREEMPTED):
                state = S.PREFILLING if move < 0.7 else old.state
            else:
                state = S.PREEMPTED if move < 0.3 else S.DECODING
            new = old._replace(state=state, prompt_tokens=old.prompt_tokens + 1)
            builder.set(old, new)
            live[request_id] = new
        frozen.append(builder.freeze())
    return frozen


def pane(active: ActiveViews, name: str) -> list[RequestView]:
    """What ``StepSnapshot.pane`` gives pane ``name`` (the one rule, read from the state)."""
    return [v for v in active if v.state.pane == name]


def test_each_pane_gets_what_the_snapshot_gives_it_in_any_order() -> None:
    run = run_of(300, seed=7)
    split, _, _ = panes()
    order = [*range(0, 300, 7), *range(299, 0, -13), 150, 150, 151, 3]  # skip, go back, stay
    for i in order:
        pending, running = split.apply(run[i])
        assert list(pending) == pane(run[i], "pending"), i
        assert list(running) == pane(run[i], "running"), i
        assert len(pending) == len(pane(run[i], "pending"))
        if len(running):
            assert running[-1] is pane(run[i], "running")[-1]


def test_a_snapshot_costs_the_chunks_it_changed_not_the_queue() -> None:
    def tested_per_snapshot(waiting: int) -> tuple[int, int]:
        builder = ActiveBuilder()
        running = [view(f"r{i}", S.DECODING) for i in range(CHUNK)]  # one chunk of them
        for v in running:
            builder.append(v)
        for i in range(waiting):
            builder.append(view(f"w{i}", S.WAITING))
        split, pending, decoding = panes()
        split.apply(builder.freeze())
        pending.views = decoding.views = 0
        for step in range(1, 11):  # each step: three running requests get a token
            for i in range(3):
                new = running[i]._replace(prompt_tokens=step)
                builder.set(running[i], new)
                running[i] = new
            pending_rows, running_rows = split.apply(builder.freeze())
            assert len(pending_rows) == waiting and list(running_rows) == running
        return pending.views, decoding.views

    small, large = tested_per_snapshot(100), tested_per_snapshot(10_000)
    assert small == large == (10 * CHUNK, 10 * CHUNK)  # the changed chunk, once a step


def test_a_pane_nothing_changed_in_is_the_same_rows_as_before() -> None:
    builder = ActiveBuilder()
    decoding = [view(f"r{i}", S.DECODING) for i in range(CHUNK)]  # a chunk of their own
    for v in decoding:
        builder.append(v)
    first = decoding[0]
    for i in range(3 * CHUNK):
        builder.append(view(f"w{i}", S.WAITING))
    split, _, _ = panes()
    pending, running = split.apply(builder.freeze())
    builder.set(first, first._replace(prompt_tokens=1))
    pending_after, running_after = split.apply(builder.freeze())
    assert pending_after is pending  # the waiting requests' chunks are the ones it had
    assert running_after is not running and running_after[0].prompt_tokens == 1


def test_any_other_sequence_is_tested_in_one_pass_into_a_list() -> None:
    rows = (view("a", S.WAITING), view("b", S.DECODING), view("c", S.PREEMPTED))
    split, pending, _ = panes()
    kept_pending, kept_running = split.apply(rows)
    assert kept_pending == [rows[0], rows[2]] and kept_running == [rows[1]]
    assert split.apply(rows)[0] == [rows[0], rows[2]] and pending.views == 6  # not cached
