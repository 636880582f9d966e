"""One list of sampling fields: the spec, the plug-in's wire record and the API body agree.

:class:`SamplingSpec` is the list (issue 17). :class:`RequestIntro` restates it because its
fields are positional on the wire and must not follow the spec when the spec is reordered;
the plug-in, the watching side and the API body all work from those two by name. These tests
fail when the lists drift, and say which way to mend them.
"""

from __future__ import annotations

import dataclasses
import typing
from types import SimpleNamespace

import msgspec
import pytest

from stepview.engine.records.facts import (
    INTRO_SAMPLING_FIELDS,
    RequestFacts,
    RequestIntro,
)
from stepview.engine.records.request_states import CoreState
from stepview.engine.watch.api.server_api import completion_body
from stepview.engine.watch.link.adopting import arrival
from stepview.model.sampling import SamplingSpec

SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(SamplingSpec))

# What the engine core does not hold in a sample's sampling parameters, and where it is.
CARRIED_ELSEWHERE = {
    "max_tokens": "RequestFacts.max_tokens, in every record: the scheduler needs it",
    "n": "the samples the client has seen: the core holds each one as a request, n = 1",
}

# RequestIntro as it is on the wire: field i is item i. Never reorder, remove or retype one
# (a reader of another version would take one value for another); append new fields below.
WIRE_LAYOUT: tuple[tuple[str, object], ...] = (
    ("prompt_token_ids", list[int]),
    ("temperature", float),
    ("top_p", float),
    ("top_k", int),
    ("min_p", float),
    ("seed", int | None),
    ("presence_penalty", float),
    ("frequency_penalty", float),
    ("repetition_penalty", float),
    ("stop", list[str]),
    ("logprobs", int | None),
    ("prompt_logprobs", int | None),
    ("ignore_eos", bool),
)

# Every field off its default, so that a field lost or mixed up on the way shows.
EVERY_FIELD_SET = SamplingSpec(
    temperature=0.5,
    top_p=0.9,
    top_k=5,
    min_p=0.05,
    max_tokens=9,
    n=2,
    seed=0,
    presence_penalty=0.25,
    frequency_penalty=-0.5,
    repetition_penalty=1.1,
    stop=("\n\n", "END"),
    logprobs=0,
    prompt_logprobs=2,
    ignore_eos=True,
)


def _facts(intro: RequestIntro | None, max_tokens: int) -> RequestFacts:
    return RequestFacts(
        "c-0123abcd", CoreState.RUNNING, 3, 3, 0, 0, 3, 1, 0, 1.0, 0, max_tokens, intro=intro
    )


def test_every_field_set_sets_every_field() -> None:
    default = SamplingSpec()
    assert [n for n in SPEC_FIELDS if getattr(EVERY_FIELD_SET, n) == getattr(default, n)] == []
    assert EVERY_FIELD_SET.errors() == {}


def test_the_intro_only_ever_grows_at_its_end() -> None:
    fields = msgspec.structs.fields(RequestIntro)
    assert tuple((f.name, f.type) for f in fields[: len(WIRE_LAYOUT)]) == WIRE_LAYOUT
    # Appended fields need defaults: an older plug-in's records lack them.
    assert [f.name for f in fields if f.required] == ["prompt_token_ids"]


def test_the_intro_carries_every_spec_field_the_core_holds_per_sample() -> None:
    wanted = [name for name in SPEC_FIELDS if name not in CARRIED_ELSEWHERE]
    missing = sorted(set(wanted) - set(INTRO_SAMPLING_FIELDS))
    extra = sorted(set(INTRO_SAMPLING_FIELDS) - set(wanted))
    assert not missing, f"append {missing} to RequestIntro (with the spec's defaults)"
    assert not extra, f"{extra} are in RequestIntro, not in SamplingSpec"
    assert len(INTRO_SAMPLING_FIELDS) == len(wanted)  # no field twice


def test_the_intro_has_the_specs_defaults_and_types() -> None:
    spec, intro = SamplingSpec(), RequestIntro([])
    types = typing.get_type_hints(SamplingSpec)
    for field in msgspec.structs.fields(RequestIntro)[1:]:
        name = field.name
        if name not in INTRO_SAMPLING_FIELDS:  # the trace context: not a sampling field
            continue
        if name == "stop":  # a list on the wire (msgpack has no tuple), a tuple in the spec
            assert (field.type, types[name]) == (list[str], tuple[str, ...])
            assert intro.stop == list(spec.stop)
            continue
        assert field.type == types[name], name
        assert getattr(intro, name) == getattr(spec, name), name


def test_a_spec_survives_the_wire_and_adoption_whole() -> None:
    spec = EVERY_FIELD_SET
    values = spec.to_dict()
    intro = RequestIntro([1, 2, 3], **{name: values[name] for name in INTRO_SAMPLING_FIELDS})
    adopted = arrival("c", _facts(intro, spec.max_tokens), spec.n, 2.0).spec
    assert adopted == spec
    # A request whose intro the client missed, or a pooling request's defaults.
    assert arrival("c", _facts(None, 9), 1, 2.0).spec == SamplingSpec(max_tokens=9)
    assert arrival("c", _facts(RequestIntro([1]), 9), 1, 2.0).spec == SamplingSpec(max_tokens=9)


def test_vllms_top_k_minus_one_is_adopted_as_off() -> None:
    adopted = arrival("c", _facts(RequestIntro([1], top_k=-1), 16), 1, 2.0).spec
    assert adopted.top_k == 0 and adopted.errors() == {}


# -- the API body ----------------------------------------------------------------------------

NOT_SAMPLING = {"model", "prompt", "request_id", "return_token_ids"}
# The spec fields a body leaves out while unset, and why that is safe: vLLM's
# CompletionRequest defaults each to the same "unset" value, and the server has no default
# of its own for it. (top_k has one, from the model's generation config: it is always sent.)
LEFT_OUT_WHILE_UNSET = {
    "seed": "None: a random seed",
    "stop": "no stop strings",
    "logprobs": "None: no logprobs",
    "prompt_logprobs": "None: no prompt logprobs",
    "ignore_eos": "False: stop at the end-of-sequence token",
}


def test_every_spec_field_is_sent_or_left_out_on_purpose() -> None:
    body = completion_body("m", "stepview-x-u1", "Hello", SamplingSpec())
    assert set(body) - NOT_SAMPLING == set(SPEC_FIELDS) - set(LEFT_OUT_WHILE_UNSET)
    # Set, every field is sent, under the spec's name, as JSON.
    body = completion_body("m", "stepview-x-u1", [1, 2], EVERY_FIELD_SET)
    assert {k: v for k, v in body.items() if k not in NOT_SAMPLING} == EVERY_FIELD_SET.to_dict()


# -- against vLLM itself (imported, never started) -------------------------------------------


@pytest.mark.engine
def test_the_spec_names_vllms_fields_with_vllms_defaults() -> None:
    from vllm import SamplingParams

    vllm_params, spec = SamplingParams(), SamplingSpec()
    for name in SPEC_FIELDS:  # the plug-in reads them by these names
        assert hasattr(vllm_params, name), f"vLLM's SamplingParams has no {name}"
        vllm_default = getattr(vllm_params, name)
        assert (tuple(vllm_default) if name == "stop" else vllm_default) == getattr(spec, name)


@pytest.mark.engine
def test_a_spec_crosses_vllm_the_plug_in_and_the_wire_whole() -> None:
    from vllm import SamplingParams

    from stepview.engine.plugin.intro import intro_of

    spec = EVERY_FIELD_SET
    params = SamplingParams(**spec.to_dict())  # as stepview's own engine makes them
    intro = intro_of(SimpleNamespace(prompt_token_ids=[1, 2, 3], sampling_params=params))
    read = msgspec.msgpack.decode(msgspec.msgpack.encode(intro), type=RequestIntro)
    assert read == intro
    assert arrival("c", _facts(read, spec.max_tokens), spec.n, 2.0).spec == spec


# What a server takes from a model's generation_config.json (vLLM's
# get_diff_sampling_param) for each field a request leaves out: Qwen2.5's, say.
GENERATION_CONFIG = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}


@pytest.mark.engine
def test_vllms_server_makes_the_body_into_the_spec() -> None:
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest

    for spec in (SamplingSpec(), EVERY_FIELD_SET):
        body = completion_body("m", "stepview-x-u1", [1, 2], spec)
        unknown = set(body) - set(CompletionRequest.model_fields)
        assert not unknown, f"vLLM's server would ignore {unknown}"
        request = CompletionRequest(**body)
        for defaults in ({}, GENERATION_CONFIG):
            params = request.to_sampling_params(spec.max_tokens, dict(defaults))
            for name in SPEC_FIELDS:
                value = getattr(params, name)
                assert (tuple(value) if name == "stop" else value) == getattr(spec, name), name
