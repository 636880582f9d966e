"""Decoding a trace's request deltas: undoing :func:`~stepview.trace.encoder.request_delta`.

Kept apart from :mod:`stepview.trace.reader` (files, lines, damage) so each stays readable:
this turns a stored version of a request plus one delta into the next stored version, its
token, logprob and text lists grown in place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from stepview.model.chat import ChatMessage
from stepview.model.grow import Growing
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import Completion, RequestState, RequestView, Timings
from stepview.trace.format import (
    BLANK_REQUEST,
    entries_in,
    lineage_in,
    positions_in,
    scheduling_in,
)
from stepview.trace.store import Sample, StoredRequest, TextLog

T = TypeVar("T")


def _grown(owned: Growing[T] | None, items: Sequence[T]) -> Growing[T]:
    growing = owned if owned is not None else Growing[T]()
    growing.extend(items)
    return growing


def _apply_completion(
    old: Completion | None, sample: Sample | None, delta: Mapping[str, Any]
) -> tuple[Completion, Sample]:
    base = old if old is not None else Completion(delta["i"])
    tokens = sample.tokens if sample is not None else None
    if "t" in delta:
        tokens = _grown(None, [int(t) for t in delta["t"]])
    elif "t+" in delta or tokens is None:
        tokens = _grown(tokens, [int(t) for t in delta.get("t+", ())])
    logprobs = sample.logprobs if sample is not None else None
    if "l" in delta:
        data = delta["l"]
        logprobs = None if data is None else _grown(None, [entries_in(p) for p in data])
    elif "l+" in delta:
        logprobs = _grown(logprobs, [entries_in(p) for p in delta["l+"]])
    if "x" in delta:
        text = TextLog(str(delta["x"]))
    elif sample is None:
        text = TextLog(str(delta.get("x+", "")))
    else:
        text = sample.text
        if "x+" in delta:
            if sample.text_len != text.length:
                raise ValueError("text appended to an old version")
            text.append(str(delta["x+"]))
    completion = Completion(
        index=int(delta.get("i", base.index)),
        token_ids=tokens.view(),
        cumulative_logprob=delta.get("cl", base.cumulative_logprob),
        logprobs=logprobs.view() if logprobs is not None else None,
        finish_reason=delta.get("f", base.finish_reason),
        stop_reason=delta.get("sr", base.stop_reason),
    )
    return completion, Sample(tokens, logprobs, text, text.length)


def apply_request_delta(
    old: StoredRequest | None, delta: Mapping[str, Any], *, lenient: bool = False
) -> StoredRequest:
    """One stored version to the next: undoes :func:`~stepview.trace.encoder.request_delta`.

    ``lenient``: a completion that ``old`` does not have, whose first delta was on a skipped
    line (marked unchanged, or appended to without an index), starts empty instead of
    failing.
    """
    base = old.view if old is not None else BLANK_REQUEST
    samples = old.samples if old is not None else ()
    completions = base.completions
    if "c" in delta:
        new_completions: list[Completion] = []
        new_samples: list[Sample] = []
        for i, entry in enumerate(delta["c"]):
            old_c = completions[i] if i < len(completions) else None
            old_s = samples[i] if i < len(samples) else None
            if lenient and (old_c is None or old_s is None):
                entry = {"i": i, **(entry or {})}  # a new sample as far as we can tell
            if entry is None:
                if old_c is None or old_s is None:
                    raise ValueError(f"completion {i} of {delta['id']!r} has no previous state")
                new_completions.append(old_c)
                new_samples.append(old_s)
            else:
                completion, sample = _apply_completion(old_c, old_s, entry)
                new_completions.append(completion)
                new_samples.append(sample)
        completions, samples = tuple(new_completions), tuple(new_samples)
    timings = base.timings
    if "tm" in delta:
        arrival, scheduled, first_token, finished = delta["tm"]
        timings = Timings(float(arrival), scheduled, first_token, finished)
    prompt_logprobs = base.prompt_logprobs
    if "pl" in delta:
        data = delta["pl"]
        prompt_logprobs = None if data is None else tuple(positions_in(data))
    view = RequestView(
        request_id=str(delta["id"]),
        prompt=str(delta.get("p", base.prompt)),
        spec=(
            SamplingSpec.from_dict({**base.spec.to_dict(), **delta["sp"]})
            if "sp" in delta
            else base.spec
        ),
        state=RequestState(delta["s"]) if "s" in delta else base.state,
        timings=timings,
        prompt_tokens=int(delta.get("pt", base.prompt_tokens)),
        computed_prompt_tokens=int(delta.get("cp", base.computed_prompt_tokens)),
        num_preemptions=int(delta.get("np", base.num_preemptions)),
        prompt_token_ids=(
            tuple(int(t) for t in delta["pi"]) if "pi" in delta else base.prompt_token_ids
        ),
        prompt_logprobs=prompt_logprobs,
        completions=completions,
        error=delta.get("e", base.error),
        **scheduling_in(delta, base),
        lineage=lineage_in(delta["ln"]) if "ln" in delta else base.lineage,
        messages=(
            tuple(ChatMessage(*message) for message in delta["m"])
            if "m" in delta
            else base.messages
        ),
        trace_context=str(delta.get("tc", base.trace_context)),
        client_id=delta.get("ci", base.client_id),
    )
    return StoredRequest(view, samples)
