"""The driver on real vLLM with the default engine settings: the properties of tests/driver.

Greedy tokens equal a bare ``LLMEngine`` loop; bad requests are rejected with vLLM's own
message while the others finish; an abort ends only its request and leaves no count
behind; pause holds the step and single-step advances one; the seed's three prompts give
their logprobs and samples, one admission per step, and stopping leaves nothing running
behind; a clone and a fork run and name their parent. Every run also passes
:func:`~tests.engine.own.driver_checks.check_run`. One class-scoped driver per class,
strictly one after the other (see driver_checks); test_driver_real_scheduling.py has the
settings that make vLLM's scheduling visible.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import psutil
import pytest

from stepview.engine.driver.loop import Driver
from stepview.engine.own.tiny_model import tiny_engine_args
from stepview.engine.own.vllm_engine import VllmEngine
from stepview.files.records import request_record
from stepview.model.commands import Abort, AddRequest, Pause, Resume, SingleStep
from stepview.model.lineage import Lineage, LineageKind
from stepview.model.prompts import seed_requests
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, StepSnapshot
from stepview.ui.drafts import clone_of, fork_of, token_texts
from tests.engine.own.driver_checks import (  # noqa: F401  (_no_pool_engine: the fixture)
    LONG_PROMPT,
    RUN_TIMEOUT,
    _add,
    _at_step,
    _final,
    _no_pool_engine,
    _running,
    _start,
    _stop,
    _wait_done,
    check_run,
)
from tests.helpers import wait_for, went_round

pytestmark = pytest.mark.engine

S = RequestState


# -- default engine settings: greedy tokens, rejections, abort, pause --------------------------

GREEDY_PROMPTS = {
    "g0": "def add(a, b):",
    "g1": "import os\nimport sys\n",
    "g2": "class Parser:\n    def __init__(self):",
    "g3": "x = [i * i for i in range(10)]",
    "g4": LONG_PROMPT,
}
GREEDY_MAX_TOKENS = 24


@dataclass
class DefaultRun:
    driver: Driver
    bare_tokens: dict[str, list[int]]


def _bare_greedy_tokens() -> dict[str, list[int]]:
    """The seed's loop on a plain LLMEngine with the same settings (then shut down)."""
    from vllm import LLMEngine, SamplingParams

    # As VllmEngine.create does: tqdm would start a monitor thread for vLLM's (disabled)
    # weight-loading bar and never stop it, leaving a thread behind in the test process.
    tqdm: Any = importlib.import_module("tqdm")
    tqdm.tqdm.monitor_interval = 0
    bare = LLMEngine.from_engine_args(tiny_engine_args())
    try:
        for rid, prompt in GREEDY_PROMPTS.items():
            params = SamplingParams(temperature=0, max_tokens=GREEDY_MAX_TOKENS)
            bare.add_request(rid, prompt, params)
        tokens: dict[str, list[int]] = {}
        while bare.has_unfinished_requests():
            for out in bare.step():
                tokens[out.request_id] = list(out.outputs[0].token_ids)  # type: ignore[index]
        return tokens
    finally:
        bare.engine_core.shutdown()


@pytest.fixture(scope="class")
def default_run() -> Iterator[DefaultRun]:
    """Bare engine first (built, run, shut down), then one driver for the whole class."""
    bare_tokens = _bare_greedy_tokens()
    driver = _start()
    try:
        yield DefaultRun(driver, bare_tokens)
    finally:
        _stop(driver)
    # Every test of the class added to this one history: check all of it together too.
    check_run(driver.history())


class TestDefaultSettings:
    def test_greedy_tokens_equal_a_bare_llm_engine_loop(self, default_run: DefaultRun) -> None:
        driver = default_run.driver
        # Paused while adding, so all prompts join the engine in one step, as in the bare loop.
        driver.send(Pause())
        for rid, prompt in GREEDY_PROMPTS.items():
            _add(driver, rid, prompt, temperature=0, max_tokens=GREEDY_MAX_TOKENS)
        driver.send(Resume())
        final = _final(_wait_done(driver, list(GREEDY_PROMPTS)))
        ours = {}
        for rid in GREEDY_PROMPTS:
            view = final[rid]
            assert view.state is S.FINISHED
            (completion,) = view.completions
            assert completion.finish_reason is not None
            ours[rid] = list(completion.token_ids)
        assert ours == default_run.bare_tokens
        assert all(len(tokens) > 0 for tokens in ours.values())
        check_run(driver.history())

    def test_rejections_carry_vllms_message_and_others_finish(
        self, default_run: DefaultRun
    ) -> None:
        driver = default_run.driver
        # Key words of vLLM's own messages. The driver does not pre-validate: each bad spec
        # reaches VllmEngine, which builds SamplingParams / calls add_request.
        bad: dict[str, tuple[str, SamplingSpec, tuple[str, ...]]] = {
            # "(parameter=...)" is how VLLMValidationError ends: vLLM wrote the message.
            "bad-temperature": (
                "hi",
                SamplingSpec(temperature=-1),
                ("temperature must be non-negative", "parameter=temperature"),
            ),
            "bad-top-p": ("hi", SamplingSpec(top_p=1.5), ("top_p must be in (0, 1]", "1.5")),
            "bad-n": ("hi", SamplingSpec(n=0), ("n must be at least 1",)),
            "bad-max-tokens": (
                "hi",
                SamplingSpec(max_tokens=0),
                ("max_tokens must be at least 1", "parameter=max_tokens"),
            ),
            "too-long": (
                "def foo(x): return x + " * 60,
                SamplingSpec(),
                ("maximum context", "512"),
            ),
            "empty": ("", SamplingSpec(), ("prompt cannot be empty",)),
        }
        _add(driver, "ok-before", "def ok():", temperature=0, max_tokens=8)
        for rid, (prompt, spec, _) in bad.items():
            driver.send(AddRequest(rid, prompt, spec))
        _add(driver, "ok-after", "class Ok:", temperature=0.7, seed=1, max_tokens=8)
        # Prefilled, sampled and finished within its first step: never seen running.
        _add(driver, "ok-one-token", "pass", temperature=0, max_tokens=1)
        final = _final(_wait_done(driver, ["ok-before", *bad, "ok-after", "ok-one-token"]))
        for rid, (_, _, words) in bad.items():
            view = final[rid]
            assert view.state is S.REJECTED, (rid, view.state)
            assert view.error is not None
            for word in words:
                assert word in view.error, (rid, view.error)
            assert view.completions == () and view.timings.finished is not None
        for rid, tokens in (("ok-before", 8), ("ok-after", 8), ("ok-one-token", 1)):
            assert final[rid].state is S.FINISHED
            assert len(final[rid].completions[0].token_ids) == tokens
        check_run(driver.history())

    def test_abort_mid_run_ends_only_that_request(self, default_run: DefaultRun) -> None:
        driver = default_run.driver
        _add(driver, "victim", "import os", temperature=0, max_tokens=400)
        for i in range(3):
            _add(driver, f"bystander{i}", f"x{i} = {i}", temperature=0, max_tokens=60)
        wait_for(
            driver,
            lambda s: any(v.request_id == "victim" and v.output_tokens >= 5 for v in s.active),
            RUN_TIMEOUT,
        )
        driver.send(Abort("victim"))
        final = _wait_done(driver, ["victim", "bystander0", "bystander1", "bystander2"])
        views = _final(final)
        victim = views["victim"]
        assert victim.state is S.ABORTED and victim.error == "aborted by the user"
        assert 5 <= victim.output_tokens < 400
        for i in range(3):
            assert views[f"bystander{i}"].state is S.FINISHED
            assert views[f"bystander{i}"].output_tokens == 60
        # IDLE: the driver asked the engine, which has no unfinished request left; vLLM's
        # scheduler counts nothing either.
        assert final.engine_state is EngineState.IDLE
        assert (final.counters.running, final.counters.waiting) == (0, 0)
        # check_run also asserts the victim never shows up active again once aborted.
        check_run(driver.history())

    def test_aborting_the_last_request_leaves_no_count_behind(
        self, default_run: DefaultRun
    ) -> None:
        """No step runs after the engine empties, so no vLLM stats say it did: the driver must."""
        driver = default_run.driver
        _add(driver, "lone", "import sys", temperature=0, max_tokens=400)
        busy = wait_for(driver, lambda s: (v := s.find("lone")) is not None and v.output_tokens > 0)
        assert busy.counters.running == 1 and busy.counters.kv_cache_usage > 0
        driver.send(Abort("lone"))
        final = _wait_done(driver, ["lone"])
        assert _final(final)["lone"].state is S.ABORTED
        assert final.engine_state is EngineState.IDLE and final.active == ()
        counters = final.counters
        assert (counters.running, counters.waiting, counters.kv_cache_usage) == (0, 0, 0.0)
        check_run(driver.history())

    def test_pause_holds_the_step_and_single_step_advances_one(
        self, default_run: DefaultRun
    ) -> None:
        driver = default_run.driver
        _add(driver, "slow", "while True:", temperature=0, max_tokens=300)
        wait_for(driver, lambda s: (v := s.find("slow")) is not None and v.output_tokens >= 3)
        driver.send(Pause())
        paused = wait_for(driver, lambda s: s.engine_state is EngineState.PAUSED)
        view = paused.find("slow")
        assert view is not None and view.state is S.DECODING
        held = went_round(driver)  # it went round since, and took no step
        assert held.step == paused.step
        assert held.find("slow") is view  # not even one more token

        for expected in (paused.step + 1, paused.step + 2):
            driver.send(SingleStep())
            stepped = wait_for(driver, _at_step(expected))
            latest = went_round(driver)  # and no second one
            assert latest.step == expected and latest.engine_state is EngineState.PAUSED
            now = latest.find("slow")
            assert now is not None
            assert now.output_tokens == view.output_tokens + 1
            assert stepped.find("slow") is now
            view = now

        driver.send(Resume())
        final = _final(_wait_done(driver, ["slow"]))
        assert final["slow"].state is S.FINISHED
        check_run(driver.history())


# -- the seed's three prompts, and a clean stop ------------------------------------------------


@dataclass
class SeedRun:
    history: Sequence[StepSnapshot]
    final: StepSnapshot
    threads_while_running: list[str]
    new_threads: list[str]  # after stop, compared with before start
    new_children: list[psutil.Process]
    engine_released: bool  # VllmEngine.shutdown() ran
    distributed: tuple[bool, bool, bool]  # torch.distributed up: before, during, after


@pytest.fixture(scope="class")
def seed_run() -> SeedRun:
    """The seed example through the driver (one request admitted per step), then stopped."""
    import torch.distributed

    threads_before = {t.ident for t in threading.enumerate()}
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    dist_before = torch.distributed.is_initialized()
    built: list[VllmEngine] = []
    driver = _start(admit_per_step=1, built=built)
    try:
        for command in seed_requests():
            driver.send(command)
        final = _wait_done(driver, ["0", "1", "2"])
        threads_while_running = [t.name for t in threading.enumerate()]
        dist_during = torch.distributed.is_initialized()
    finally:
        _stop(driver)
    new_threads = [
        f"{t.name} ({t.ident})" for t in threading.enumerate() if t.ident not in threads_before
    ]
    new_children = [
        p for p in psutil.Process().children(recursive=True) if p.pid not in children_before
    ]
    (engine,) = built
    return SeedRun(
        history=driver.history(),
        final=final,
        threads_while_running=threads_while_running,
        new_threads=new_threads,
        new_children=new_children,
        engine_released=engine.llm_engine is None,
        distributed=(dist_before, dist_during, torch.distributed.is_initialized()),
    )


class TestSeedPrompts:
    def test_four_completions_logprobs_on_the_first_two_samples_on_the_third(
        self, seed_run: SeedRun
    ) -> None:
        views = _final(seed_run.final)
        assert set(views) == {"0", "1", "2"}
        assert all(v.state is S.FINISHED for v in views.values())
        assert sum(len(v.completions) for v in views.values()) == 4

        first = views["0"]
        (completion,) = first.completions
        assert completion.logprobs is not None
        assert len(completion.logprobs) == len(completion.token_ids) > 0
        for token, position in zip(completion.token_ids, completion.logprobs, strict=True):
            assert position[0].token_id == token  # the sampled token comes first
        assert first.prompt_logprobs is not None
        assert len(first.prompt_logprobs) == first.prompt_tokens == len(first.prompt_token_ids)
        assert first.prompt_logprobs[0] is None  # nothing precedes the first prompt token
        for token, lp in zip(first.prompt_token_ids[1:], first.prompt_logprobs[1:], strict=True):
            assert lp is not None and lp[0].token_id == token

        assert views["1"].completions[0].logprobs is None
        assert views["1"].prompt_logprobs is None

        third = views["2"]
        assert [c.index for c in third.completions] == [0, 1]
        assert all(c.finish_reason is not None and c.token_ids for c in third.completions)

    def test_lifecycle_counters_and_one_admission_per_step(self, seed_run: SeedRun) -> None:
        paths = check_run(seed_run.history)
        # admit_per_step=1: the later prompts were visibly pending while the first ran.
        assert paths["1"][0] is S.PENDING and paths["2"][0] is S.PENDING
        steps_in_engine = {
            rid: min(
                s.step
                for s in seed_run.history
                if (v := s.find(rid)) is not None and v.state is not S.PENDING
            )
            for rid in ("0", "1", "2")
        }
        assert steps_in_engine == {"0": 1, "1": 2, "2": 3}
        # n=2 counts twice in vLLM's scheduler: check_counters weighted it, and it showed.
        assert max(s.counters.running for s in seed_run.history) == 4

    def test_stop_shuts_vllm_down_and_leaves_no_thread_or_child_process(
        self, seed_run: SeedRun
    ) -> None:
        assert "stepview-driver" in seed_run.threads_while_running
        assert seed_run.new_threads == []
        assert seed_run.new_children == []
        # In-process vLLM starts no thread of its own; what shows that its shutdown really
        # ran is the process-global torch.distributed group it sets up and tears down.
        assert seed_run.engine_released
        assert seed_run.distributed == (False, True, False)


# -- clones and forks (the UI's c and f keys send these commands) -----------------------------


def test_a_clone_and_a_fork_run_and_name_their_parent() -> None:
    with _running() as driver:
        _add(driver, "r1", "The quick brown fox", temperature=0, max_tokens=8, logprobs=2)
        parent = _final(_wait_done(driver, ["r1"]))["r1"]
        assert parent.state is S.FINISHED and len(parent.completions[0].token_ids) == 8
        clone = clone_of(parent)
        fork = fork_of(parent, 0, 3)
        assert fork is not None
        driver.send(
            AddRequest("r2", clone.prompt, replace(clone.spec, seed=7), lineage=clone.lineage)
        )
        driver.send(AddRequest("r3", fork.prompt, fork.spec, lineage=fork.lineage))
        final = _final(_wait_done(driver, ["r2", "r3"]))
    cloned, forked = final["r2"], final["r3"]
    assert cloned.state is forked.state is S.FINISHED
    assert cloned.lineage == Lineage("r1", LineageKind.CLONE) and cloned.prompt == parent.prompt
    assert forked.lineage == Lineage("r1", LineageKind.FORK, 0, 3)
    assert forked.lineage.label() == "fork of r1 @ token 3"
    # The fork's prompt is the parent's plus its first four tokens' text, as vLLM returned it.
    texts = token_texts(parent.completions[0])
    assert texts is not None and forked.prompt == parent.prompt + "".join(texts[:4])
    assert parent.completions[0].text.startswith("".join(texts[:4]))
    assert forked.prompt_tokens > parent.prompt_tokens
    assert request_record(forked)["parent"] == request_record(cloned)["parent"] == "r1"
