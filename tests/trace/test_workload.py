"""The workload of a trace (``--rerun``, ``--export-workload``): what is sent again, when, and
what is named instead of sent. Traces are written from hand-made snapshots and read back, as a
rerun reads a recording."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepview.model.chat import ChatMessage
from stepview.model.commands import AddRequest, Arrival
from stepview.model.grow import Frozen
from stepview.model.load import LoadSpec, plan_load
from stepview.model.prompts import names_token_ids, token_ids_name
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import (
    Completion,
    EngineInfo,
    EngineState,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)
from stepview.trace.reader import load_trace
from stepview.trace.workload import Workload, workload_of
from tests.trace.runs import write_trace

GREEDY = SamplingSpec(temperature=0.0, max_tokens=8)
OWN = EngineInfo(model="m", max_num_seqs=4, block_size=16)
WATCHED = EngineInfo(model="vLLM server at tcp://box:5570", attached="tcp://box:5570")


def done(
    rid: str,
    prompt: str,
    *samples: tuple[int, str | None],
    arrival: float = 1.0,
    spec: SamplingSpec = GREEDY,
    ids: tuple[int, ...] = (),
    state: RequestState = RequestState.FINISHED,
    messages: tuple[ChatMessage, ...] = (),
) -> RequestView:
    """A request in its final view: ``samples`` as (tokens produced, finish reason)."""
    completions = tuple(
        Completion.of_text(i, "x" * count, token_ids=Frozen(list(range(count))), finish_reason=why)
        for i, (count, why) in enumerate(samples)
    )
    return RequestView(
        rid,
        prompt,
        spec,
        state,
        Timings(arrival, arrival + 0.1, arrival + 0.2, arrival + 1.0),
        prompt_tokens=len(ids),
        prompt_token_ids=ids,
        completions=completions,
        messages=messages,
    )


def workload(
    tmp_path: Path, *views: RequestView, info: EngineInfo = OWN, ready: float = 0.5
) -> Workload:
    """The workload of a trace whose engine starts, runs from ``ready`` and ends with ``views``."""
    snapshots = [
        StepSnapshot(step=0, clock=0.0, engine_state=EngineState.STARTING, info=info),
        StepSnapshot(step=0, clock=ready, engine_state=EngineState.IDLE, info=info),
        StepSnapshot(
            step=1, clock=9.0, engine_state=EngineState.IDLE, info=info, finished=Frozen(views)
        ),
    ]
    path = tmp_path / "run.trace.jsonl"
    write_trace(path, snapshots)
    return workload_of(load_trace(path))


def test_text_prompts_go_again_as_text_with_their_parameters(tmp_path: Path) -> None:
    stopped = done("a", "Once upon a time", (5, "stop"), ids=(1, 2, 3, 4))
    [item] = workload(tmp_path, stopped).requests
    assert item.request == AddRequest("a", "Once upon a time", GREEDY)  # the text, not the ids
    assert not item.forced and item.output_tokens == (5,)
    assert item.prompt_token_ids == (1, 2, 3, 4)  # kept for vLLM's export


def test_a_length_it_did_not_choose_is_forced(tmp_path: Path) -> None:
    seeded = SamplingSpec(temperature=0.8, seed=7, max_tokens=8)
    ran_out = done("len", "p", (8, "length"), spec=seeded, arrival=1.0)
    aborted = done("abort", "p", (3, None), state=RequestState.ABORTED, arrival=2.0)
    in_flight = done("live", "p", (2, None), state=RequestState.UNFINISHED, arrival=3.0)
    never = done("queued", "p", state=RequestState.UNFINISHED, arrival=4.0)
    mixed = done(
        "mixed", "p", (2, "stop"), (8, "length"), spec=SamplingSpec(n=2, max_tokens=8), arrival=5
    )
    already = done("load", "p", (8, "length"), spec=SamplingSpec(max_tokens=8, ignore_eos=True))
    items = {
        i.request_id: i
        for i in workload(tmp_path, ran_out, aborted, in_flight, never, mixed, already).requests
    }
    assert items["len"].request.spec == SamplingSpec(
        temperature=0.8, seed=7, max_tokens=8, ignore_eos=True
    )  # the seed stays: a sampled rerun draws the same tokens
    assert items["abort"].request.spec.max_tokens == 3
    assert items["live"].request.spec.max_tokens == 2
    assert {rid for rid, item in items.items() if item.forced} == {"len", "abort", "live"}
    assert items["queued"].request.spec == GREEDY  # it never showed a length
    assert items["mixed"].request.spec == SamplingSpec(n=2, max_tokens=8)  # one sample stopped
    assert not items["load"].forced  # its parameters held its length already


def test_ids_only_prompts_go_again_as_ids(tmp_path: Path) -> None:
    ids = (101, 102, 103)
    load = done("load-0", "(synthetic greedy: 3 random token ids)", (8, "length"), ids=ids)
    given = done("f", token_ids_name(3), (2, "stop"), ids=ids)
    items = workload(tmp_path, load, given).requests
    assert [i.request.prompt_token_ids for i in items] == [ids, ids]
    assert items[0].request.prompt == load.prompt  # named as before, in the panes


def test_a_prompt_that_cannot_be_rebuilt_is_named_not_dropped(tmp_path: Path) -> None:
    lost = done("lost", "(synthetic greedy: 3 random token ids)", (8, "length"))  # no ids kept
    fine = done("fine", "hello", (1, "stop"))
    result = workload(tmp_path, lost, fine)
    assert [i.request_id for i in result.requests] == ["fine"]
    [skipped] = result.skipped
    assert skipped.request_id == "lost" and "only as token ids" in skipped.why


def test_a_watched_servers_requests_go_again_as_the_ids_its_core_ran(tmp_path: Path) -> None:
    # The text a watch shows was decoded by the server (special tokens and all): the ids are
    # what the engine ran, whatever the text says.
    decoded = done("3f9a1c2e", "<s>Hello there", (4, "stop"), ids=(1, 15043, 727))
    unseen = done("0badc0de", "(7 prompt tokens)", (4, "length"))  # its intro was missed
    result = workload(tmp_path, decoded, unseen, info=WATCHED)
    [item] = result.requests
    assert item.request.prompt_token_ids == (1, 15043, 727)
    assert result.attached and [s.request_id for s in result.skipped] == ["0badc0de"]


def test_a_chat_request_goes_again_as_its_messages(tmp_path: Path) -> None:
    messages = (ChatMessage("user", "What is the capital of France?"),)
    chat = done(
        "c", "<|user|>What is the capital of France?", (3, "stop"), ids=(5, 6), messages=messages
    )
    [item] = workload(tmp_path, chat).requests
    assert item.request == AddRequest("c", "", GREEDY, messages=messages)


def test_arrivals_keep_their_offsets_from_the_engine_being_up(tmp_path: Path) -> None:
    views = [done(rid, "p", (1, "stop"), arrival=at) for rid, at in (("b", 2.5), ("a", 1.5))]
    result = workload(tmp_path, *views, ready=0.5)
    assert [(i.request_id, i.at) for i in result.requests] == [("a", 1.0), ("b", 2.0)]
    assert result.span == 2.0
    assert [a.at for a in result.arrivals(speed=4)] == [0.25, 0.5]
    with pytest.raises(ValueError, match="above 0"):
        result.arrivals(speed=0)


def test_a_recording_that_opens_on_requests_in_flight_starts_at_the_first(tmp_path: Path) -> None:
    # A flight recording (or a watch) opens with requests that arrived before it began.
    early = done("early", "p", (1, "stop"), arrival=-3.0)
    later = done("later", "p", (1, "stop"), arrival=1.0)
    arrivals = workload(tmp_path, early, later, ready=0.0).arrivals()
    assert arrivals == (
        Arrival(0.0, AddRequest("early", "p", GREEDY)),
        Arrival(4.0, AddRequest("later", "p", GREEDY)),
    )


def test_the_block_size_is_the_engines(tmp_path: Path) -> None:
    assert workload(tmp_path, done("a", "p", (1, "stop"))).block_size == 16


def test_every_synthetic_prompt_is_known_for_ids() -> None:
    """The load's names are what a rerun reads as "ids only": a load renamed must stay so."""
    for arrival in plan_load(LoadSpec(count=8, mix=(("greedy", 1), ("sampled", 1)))):
        request = arrival.request
        assert names_token_ids(request.prompt, request.prompt_token_ids), request.prompt
    assert not names_token_ids("(3 token ids)", (1, 2))  # a count that does not fit is text
    assert not names_token_ids("what are token ids?", (1, 2, 3))
