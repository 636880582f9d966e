"""Finished requests keep their token ids packed: equal to what they were, a fraction of
the memory (issue 18: a watch's memory follows its configuration, not the tokens it saw)."""

from __future__ import annotations

import sys

from stepview.engine.driver.ledger import RequestLedger
from stepview.model.commands import AddRequest
from stepview.model.engine_api import CompletionUpdate, OutputUpdate, StepResult
from stepview.model.grow import Frozen, Packed, packed
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineCounters
from stepview.testing.fake_engine import FakeEngine


def test_packed_reads_as_the_list_it_was_made_from() -> None:
    ids = list(range(40_000, 40_300))
    kept = Packed(ids)
    assert kept == ids and kept == tuple(ids) and kept == Frozen(ids)
    assert list(kept) == ids and kept[5] == ids[5] and kept[-1] == ids[-1]
    assert kept[10:13] == ids[10:13] and len(kept) == 300
    assert packed(kept) is kept
    assert Packed([2**40]) == [2**40]  # past 32 bits: 8 bytes, still right


def test_packed_takes_a_fraction_of_a_lists_memory() -> None:
    ids = list(range(40_000, 40_300))  # ids past 256: each an int object of its own
    as_list = sys.getsizeof(ids) + sum(sys.getsizeof(i) for i in ids)
    as_array = sys.getsizeof(Packed(ids)._items)
    assert as_array * 6 < as_list


def test_the_finished_window_keeps_packed_tokens_the_sinks_get_the_view_as_it_was() -> None:
    ledger = RequestLedger(lambda: 0.0)
    ledger.accept(AddRequest("r", "hello", SamplingSpec(max_tokens=3)))
    ledger.admit(FakeEngine())
    tokens = [40_001, 40_002, 40_003]
    done = CompletionUpdate(0, " a b c", tokens, None, None, "length", None)
    update = OutputUpdate("r", [50_000, 50_001], None, (done,), True)
    ledger.apply(StepResult((update,), None, EngineCounters()), 0.5)
    (given,) = ledger.take_finished()
    (kept,) = ledger.finished()
    assert isinstance(kept.completions[0].token_ids, Packed)
    assert isinstance(kept.prompt_token_ids, Packed)
    assert not isinstance(given.completions[0].token_ids, Packed)  # the trace's extends()
    assert kept.completions[0].token_ids == given.completions[0].token_ids == tokens
    assert kept.prompt_token_ids == given.prompt_token_ids
    assert kept.completions[0].text == " a b c" and kept.state is given.state
