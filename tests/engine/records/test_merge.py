"""Records read as one (``merge_many``): what a watch too far behind to read every step keeps.

A starved watch folds thousands of records at once, so the merge is one pass; these tests pin
down that one pass says what reading the records two at a time says, however they are
grouped, for every way a request's token tail can continue (contiguous, overlapping, after a
gap, resent whole), and what a step's departures and ends become.
"""

from __future__ import annotations

import functools
import itertools

import msgspec

from stepview.engine.records.entries import merge_many, merge_records
from stepview.engine.records.facts import EndedFacts, StepFacts
from tests.engine.watch.attach_helpers import record, request


def tailed(step: int, outputs: int, new: list[int], **more: object) -> StepFacts:
    """A record of change naming request ``a`` with ``outputs`` tokens, ``new`` its tail."""
    facts = record(step, request("a", outputs=outputs, new=new, intro=step == 1), full=step == 1)
    return msgspec.structs.replace(facts, **more) if more else facts


RECORDS = [
    tailed(1, 2, [10, 11], model="m"),
    tailed(2, 3, [12]),  # contiguous
    tailed(3, 5, [13, 14]),
    tailed(4, 6, [14, 15]),  # overlapping: token 14 sent again
    tailed(5, 9, [17, 18]),  # a gap: token 16 was never sent (the reader notices)
    tailed(6, 10, [19]),
    tailed(7, 10, list(range(30, 40))),  # resent whole (a resubscription)
    tailed(8, 11, [40], finished=["x"], ended=[EndedFacts("x", 1, [1], "length")]),
    tailed(9, 11, [], finished=["y", "x"]),
]


def test_one_pass_says_what_reading_two_at_a_time_says() -> None:
    pairwise = functools.reduce(merge_records, RECORDS)
    assert merge_many(RECORDS) == pairwise
    (a,) = pairwise.requests
    assert a.new_token_ids == [*range(30, 40), 40] and a.num_output_tokens == 11
    assert a.intro is not None  # the first record's, kept
    assert pairwise.step == 9 and pairwise.full and pairwise.model == "m"
    assert pairwise.finished == ["y", "x"]  # in order of leaving, the last time said
    assert [end.req_id for end in pairwise.ended] == ["x"]


def test_any_grouping_gives_the_same_record() -> None:
    """A backlog is folded in bursts of any size: the result must not depend on them."""
    whole = merge_many(RECORDS)
    for cut in itertools.combinations(range(1, len(RECORDS)), 2):
        i, j = cut
        parts = [merge_many(RECORDS[:i]), merge_many(RECORDS[i:j]), merge_many(RECORDS[j:])]
        assert merge_many(parts) == whole, cut


def test_each_tail_rule() -> None:
    def tail(*records: StepFacts) -> list[int]:
        return merge_many(records).requests[0].new_token_ids

    assert tail(RECORDS[0], RECORDS[1]) == [10, 11, 12]  # contiguous
    assert tail(RECORDS[2], RECORDS[3]) == [13, 14, 15]  # overlapping
    assert tail(RECORDS[3], RECORDS[4]) == [17, 18]  # after a gap: only what follows it
    assert tail(RECORDS[5], RECORDS[6]) == list(range(30, 40))  # the resent whole
    # The records' own lists are never changed by a merge (they may be read again).
    assert RECORDS[1].requests[0].new_token_ids == [12]
