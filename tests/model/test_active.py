"""The active views: a snapshot's sequence of requests, built at the cost of what changed."""

from __future__ import annotations

import random

from stepview.model.active import CHUNK, ActiveBuilder, ActiveViews, changed_between
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState, RequestView, Timings


def view(request_id: str, version: int = 0) -> RequestView:
    return RequestView(
        request_id, f"p{version}", SamplingSpec(), RequestState.WAITING, Timings(0.0)
    )


def test_random_changes_match_a_plain_list_and_say_what_changed() -> None:
    rng = random.Random(7)
    builder = ActiveBuilder()
    model: list[RequestView] = []
    before = builder.freeze()
    for step in range(400):
        touched: set[str] = set()
        for _ in range(rng.randint(0, 12)):
            action = rng.random()
            if action < 0.4 or not model:
                new = view(f"r{step}-{len(model)}-{rng.random():.6f}")
                builder.append(new)
                model.append(new)
                touched.add(new.request_id)
            elif action < 0.75:
                i = rng.randrange(len(model))
                new = model[i]._replace(prompt=f"v{step}")
                builder.set(model[i], new)
                model[i] = new
                touched.add(new.request_id)
            else:
                gone = model.pop(rng.randrange(len(model)))
                builder.remove(gone)
                touched.add(gone.request_id)
        after = builder.freeze()
        assert list(after) == model and len(after) == len(model)
        assert all(after[i] is model[i] for i in range(len(model)))
        old, new_views = changed_between(before, after)
        seen = {v.request_id for v in (*old, *new_views)}
        visible = {v.request_id for v in (*before, *after)}  # (not added and gone in a step)
        assert touched & visible <= seen  # everything that changed is among them
        if len(after.chunks) > 4:  # and far fewer than every request, as a rule
            assert len(seen) <= max(len(touched), 1) * 4 * CHUNK
        before = after
    assert isinstance(before, ActiveViews)


def test_a_step_that_changed_nothing_hands_out_the_same_views() -> None:
    builder = ActiveBuilder()
    for i in range(100):
        builder.append(view(f"r{i}"))
    first = builder.freeze()
    assert builder.freeze() is first
    waiting = view("r50")
    assert changed_between(first, first) == ((), ())
    builder.set(first[50], waiting._replace(prompt="x"))
    second = builder.freeze()
    old, new = changed_between(first, second)
    assert [v.request_id for v in new] == [v.request_id for v in old]  # one chunk
    assert sum(1 for _ in new) <= CHUNK
    # Snapshots that are not consecutive are compared chunk by chunk, still right.
    builder.set(second[0], view("r0", 1))
    third = builder.freeze()
    _, new = changed_between(first, third)
    assert {"r0", "r50"} <= {v.request_id for v in new}


def test_equal_to_a_tuple_of_the_same_views() -> None:
    builder = ActiveBuilder()
    views = [view(f"r{i}") for i in range(70)]
    for v in views:
        builder.append(v)
    frozen = builder.freeze()
    assert frozen == tuple(views) and frozen[-1] is views[-1]
    assert tuple(frozen[10:12]) == tuple(views[10:12])
