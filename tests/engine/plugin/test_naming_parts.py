"""The rules of a full record's parts (:mod:`stepview.engine.plugin.naming`), on plain objects:
each part introduces at most its size of the requests held when it began, those that changed
first; one named beyond that is introduced by a later part, whether or not it changes again;
requests that arrive meanwhile are introduced at once; a long prompt counts for
many short ones. test_full_parts_real.py runs the same over vLLM's scheduler.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from stepview.engine.plugin.naming import PART_TOKENS_EACH, Naming


def held(*names: str, prompt: int = 10) -> dict[str, Any]:
    return {n: SimpleNamespace(num_prompt_tokens=prompt, num_output_tokens=0) for n in names}


def record(
    naming: Naming,
    requests: dict[str, Any],
    sent: dict[str, int],
    scheduled: tuple[str, ...] = (),
    *,
    full: bool = False,
) -> tuple[list[str], list[str]]:
    """One record: the requests it names, and those it introduces (then in ``sent``)."""
    named = list(
        naming.named(requests, dict.fromkeys(scheduled, 1), (), (), set(), full, full, sent)
    )
    introduced = [n for n in named if n not in sent and n not in naming.later]
    sent.update(dict.fromkeys(introduced, 0))
    return named, introduced


def test_what_changed_shares_the_part_and_the_rest_is_introduced_first_later() -> None:
    naming = Naming(2)
    requests = held("a", "b", "c", "d", "e", "f")
    sent: dict[str, int] = {}
    named, introduced = record(naming, requests, sent, ("a", "b", "c"), full=True)
    assert named == ["a", "b", "c"] and introduced == ["a", "b"]  # c: named, intro later
    assert naming.to_come(False) > 0
    # c is no longer scheduled (vLLM preempted it): the next part introduces it all the same.
    named, introduced = record(naming, requests, sent)
    assert introduced == ["c", "d"]
    naming.arrived.append("new")
    requests.update(held("new"))
    named, introduced = record(naming, requests, sent)
    assert introduced == ["new", "e", "f"]  # an arrival goes at once, besides the part
    assert naming.to_come(False) == 0  # the last part


def test_a_long_prompt_fills_a_part_alone() -> None:
    naming = Naming(4)
    requests = {**held("long", prompt=4 * PART_TOKENS_EACH), **held("a", "b", "c", "d")}
    sent: dict[str, int] = {}
    assert record(naming, requests, sent, full=True)[1] == ["long"]
    assert record(naming, requests, sent)[1] == ["a", "b", "c", "d"]
    assert naming.to_come(False) == 0


def test_a_full_record_that_fits_one_part_goes_whole() -> None:
    naming = Naming(8)
    requests = held("a", "b", "c")
    named, introduced = record(naming, requests, {}, full=True)
    assert named == introduced == ["a", "b", "c"] and naming.to_come(False) == 0
