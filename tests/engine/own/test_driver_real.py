"""The driver on real vLLM (demo model, CPU): the same properties as tests/driver, for real.

tests/driver checks the driver's rules on a fake engine in milliseconds; the fake is only
worth something if real vLLM behaves the way it pretends to. So here every claim the UI makes
from snapshots is checked against what vLLM actually did: tokens equal a bare
``LLMEngine`` loop, states only move forward except through a preemption vLLM recorded, the
counters vLLM reports agree with the requests the snapshot shows, and stopping leaves nothing
running behind.

Only one vLLM engine may be alive per process (see conftest), and every driver owns its
engine and shuts it down on stop. So the pool's engine is released once for this module, and
drivers are strictly sequential: one class-scoped driver per group of tests with the same
engine settings, the others built and stopped inside their test.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import psutil
import pytest

from stepview.engine.driver.loop import Driver, PhaseCallback
from stepview.engine.own.tiny_model import tiny_engine_args
from stepview.engine.own.vllm_engine import VllmEngine
from stepview.files.records import request_record
from stepview.model.commands import Abort, AddRequest, Pause, Resume, SingleStep
from stepview.model.engine_api import Engine
from stepview.model.lineage import Lineage, LineageKind
from stepview.model.prompts import seed_requests
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, RequestView, StepSnapshot
from stepview.ui.drafts import clone_of, fork_of, token_texts
from tests.helpers import all_done, wait_for, went_round
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine

S = RequestState
# Every snapshot of a run is kept: the checks below walk the whole history.
HISTORY = 1_000_000
# Generous: a busy CI machine with 2 cores; a healthy run takes a few seconds.
RUN_TIMEOUT = 90.0
# The order a request moves through; PREEMPTED sits where vLLM puts it back (the waiting queue).
_RANK = {
    S.PENDING: 0,
    S.WAITING: 1,
    S.PREEMPTED: 2,
    S.PREFILLING: 3,
    S.DECODING: 4,
    S.FINISHED: 5,
    S.ABORTED: 5,
    S.REJECTED: 5,
}
_QUEUED = frozenset({S.WAITING, S.PREEMPTED})

# ~360 tokens with the demo tokenizer: several 64-token prefill chunks, or two of them fill
# the tiny KV cache below.
LONG_PROMPT = "def foo(x): return x + " * 40
# Smallest KV cache vLLM accepts with max_model_len=512 (see test_scheduler_plugin.py):
# 4 usable blocks of 128 tokens, so long requests must take turns.
TINY_KV_BYTES = 5 * 128 * 1024


# -- helpers -----------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _no_pool_engine(engines: EnginePool) -> None:
    """Shut the pool's engine down before any driver here builds its own (one per process).

    Module scope, so it runs before the class-scoped drivers are set up.
    """
    engines.release()


def _factory(
    built: list[VllmEngine] | None = None, **overrides: Any
) -> Callable[[PhaseCallback], Engine]:
    """What stepview's CLI does: a VllmEngine over the demo model, built on the driver thread.

    ``built`` receives the engine, for tests that check what the driver did to it.
    """

    def build(on_phase: PhaseCallback) -> Engine:
        engine = VllmEngine.create(
            tiny_engine_args(**overrides), demo_model=True, model_label="demo", on_phase=on_phase
        )
        if built is not None:
            built.append(engine)
        return engine

    return build


def _start(
    *, admit_per_step: int = 0, built: list[VllmEngine] | None = None, **overrides: Any
) -> Driver:
    driver = Driver(
        _factory(built, **overrides), history_size=HISTORY, admit_per_step=admit_per_step
    )
    driver.start()
    ready = wait_for(driver, lambda s: s.engine_state is not EngineState.STARTING, RUN_TIMEOUT)
    assert ready.engine_state is EngineState.IDLE, ready.phase
    return driver


def _stop(driver: Driver) -> None:
    driver.stop(timeout=60)
    assert not driver.alive, "driver thread did not end"
    assert driver.latest().engine_state is EngineState.STOPPED, driver.error


@contextmanager
def _running(**overrides: Any) -> Iterator[Driver]:
    driver = _start(**overrides)
    try:
        yield driver
    finally:
        _stop(driver)


def _add(driver: Driver, request_id: str, prompt: str, **spec: Any) -> None:
    driver.send(AddRequest(request_id, prompt, SamplingSpec(**spec)))


def _wait_done(driver: Driver, ids: Sequence[str]) -> StepSnapshot:
    """Wait until every id reached a final state and the engine has nothing left."""
    wanted = set(ids)

    def done(s: StepSnapshot) -> bool:
        return wanted <= {v.request_id for v in s.finished} and all_done(s)

    return wait_for(driver, done, RUN_TIMEOUT)


def _final(snapshot: StepSnapshot) -> dict[str, RequestView]:
    return {v.request_id: v for v in snapshot.finished}


def _live_samples(view: RequestView) -> int:
    """Sequences this request holds in vLLM's scheduler: one per sample not finished yet.

    vLLM's counters count each of the ``n`` samples of a request (they are separate
    scheduler requests); the snapshot shows the request once.
    """
    return view.spec.n - sum(c.finish_reason is not None for c in view.completions)


def check_lifecycles(history: Sequence[StepSnapshot]) -> dict[str, list[RequestState]]:
    """Walk every snapshot; assert each request only moves forward; return each one's path.

    Forward is PENDING -> WAITING -> PREFILLING -> DECODING -> final, skipping allowed (a
    request can be admitted and prefilled within one step). The only way back is a
    preemption, which must be visible where it happens: state PREEMPTED with a higher
    ``num_preemptions``. Prefill progress falls only there, and a final state is final.
    """
    last: dict[str, RequestView] = {}
    paths: dict[str, list[RequestState]] = {}
    for snap in history:
        ids = [v.request_id for v in snap.active] + [v.request_id for v in snap.finished]
        assert len(ids) == len(set(ids)), f"step {snap.step}: a request shown twice"
        for view in (*snap.active, *snap.finished):
            rid = view.request_id
            prev = last.get(rid)
            last[rid] = view
            path = paths.setdefault(rid, [])
            if not path or path[-1] is not view.state:
                path.append(view.state)
            if prev is None or prev is view:
                continue
            where = f"{rid} at step {snap.step}: {prev.state} -> {view.state}"
            if prev.state.done:
                assert view.state is prev.state, where
                continue
            assert view.num_preemptions >= prev.num_preemptions, where
            preempted_here = view.num_preemptions > prev.num_preemptions
            if preempted_here:
                assert view.state is S.PREEMPTED, where
            if view.state is S.PREEMPTED and prev.state is not S.PREEMPTED:
                assert preempted_here, f"{where} without a recorded preemption"
            if _RANK[view.state] < _RANK[prev.state]:
                assert view.state is S.PREEMPTED and preempted_here, f"{where} (backwards)"
            if view.computed_prompt_tokens < prev.computed_prompt_tokens:
                assert preempted_here, f"{where}: prefill progress fell without a preemption"
            assert view.computed_prompt_tokens <= view.prompt_tokens, where
    for rid, view in last.items():
        assert view.state.done, f"{rid} never finished ({view.state})"
        if view.state is S.FINISHED and view.output_tokens > view.spec.n:
            # It produced tokens over at least two steps: one snapshot showed it decoding.
            assert S.DECODING in paths[rid], (rid, paths[rid])
    return paths


def check_counters(history: Sequence[StepSnapshot]) -> int:
    """vLLM's running/waiting counts agree with the states the same snapshot shows.

    Checked on the snapshot published right after each step (between steps a command may
    change the requests while the counters still describe the last step). Returns how many
    snapshots were checked.
    """
    checked = 0
    previous_step = 0
    for snap in history:
        if snap.step != previous_step:
            running = sum(_live_samples(v) for v in snap.active if v.state.pane == "running")
            queued = sum(_live_samples(v) for v in snap.active if v.state in _QUEUED)
            counters = snap.counters
            assert (counters.running, counters.waiting) == (running, queued), (
                f"step {snap.step}: counters {counters} vs "
                f"{[(v.request_id, v.state.value) for v in snap.active]}"
            )
            checked += 1
        previous_step = snap.step
    return checked


def check_timings(finished: Sequence[RequestView]) -> None:
    """Every finished request has all its timings, in order."""
    for view in finished:
        if view.state is not S.FINISHED:
            continue
        t = view.timings
        assert t.scheduled is not None and t.first_token is not None, view
        assert t.finished is not None
        assert t.arrival <= t.scheduled <= t.first_token <= t.finished, (view.request_id, t)
        assert view.computed_prompt_tokens == view.prompt_tokens > 0, view.request_id


def check_run(history: Sequence[StepSnapshot]) -> dict[str, list[RequestState]]:
    paths = check_lifecycles(history)
    assert check_counters(history) > 0
    check_timings(history[-1].finished)
    return paths


def _at_step(step: int) -> Callable[[StepSnapshot], bool]:
    return lambda s: s.step == step


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


# -- scheduling made visible: continuous batching, preemption, chunked prefill -----------------


def test_continuous_batching_some_wait_while_others_run() -> None:
    ids = [f"b{i}" for i in range(8)]
    with _running(max_num_seqs=4) as driver:
        driver.send(Pause())  # all eight join the engine together
        for i, rid in enumerate(ids):
            _add(driver, rid, f"def f{i}(x): return x", temperature=0, max_tokens=12)
        driver.send(Resume())
        final = _final(_wait_done(driver, ids))
        history = driver.history()
    assert all(final[rid].state is S.FINISHED for rid in ids)
    paths = check_run(history)
    mixed = [
        s for s in history if s.pane("running") and any(v.state is S.WAITING for v in s.active)
    ]
    assert mixed, "no snapshot showed requests waiting while others ran"
    assert all(len(s.pane("running")) <= 4 for s in history)
    assert max(s.counters.waiting for s in history) == 4
    # The four that waited did run later, in the order they came.
    waited = [rid for rid in ids if S.WAITING in paths[rid]]
    assert waited == ids[4:]
    for rid in waited:
        assert paths[rid].index(S.WAITING) < paths[rid].index(S.DECODING)


def test_tiny_kv_cache_preemption_shows_in_the_snapshots() -> None:
    ids = [f"p{i}" for i in range(4)]
    prompt = "def foo(x): return x + " * 20  # ~180 tokens: two of them fill the cache
    with _running(kv_cache_memory_bytes=TINY_KV_BYTES) as driver:
        for rid in ids:
            _add(driver, rid, prompt, temperature=0, max_tokens=160)
        final = _final(_wait_done(driver, ids))
        history = driver.history()
    paths = check_run(history)  # includes: going back only through a recorded preemption
    preempted = [rid for rid in ids if S.PREEMPTED in paths[rid]]
    assert preempted, "no request was preempted"
    total = sum(final[rid].num_preemptions for rid in ids)
    assert total >= len(preempted)
    # vLLM's per-step preemption counts add up to what the requests carry.
    steps = {s.step: s.counters.preemptions for s in history}
    assert sum(steps.values()) == total
    # The snapshot where it happened: state PREEMPTED, prefill progress back to 0.
    for rid in preempted:
        first = next(v for s in history if (v := s.find(rid)) and v.state is S.PREEMPTED)
        assert first.computed_prompt_tokens == 0 and first.num_preemptions == 1
    # Preemption costs time, never tokens.
    assert all(final[rid].state is S.FINISHED and final[rid].output_tokens == 160 for rid in ids)


def test_chunked_prefill_shows_growing_progress() -> None:
    chunk = 64
    with _running(max_num_batched_tokens=chunk) as driver:
        _add(driver, "long", LONG_PROMPT, temperature=0, max_tokens=3)
        final = _final(_wait_done(driver, ["long"]))
        history = driver.history()
    check_run(history)
    prefilling = [
        v for s in history if (v := s.find("long")) is not None and v.state is S.PREFILLING
    ]
    total = final["long"].prompt_tokens
    assert total > 4 * chunk
    # One snapshot per step, one chunk per step: 64, 128, 192, ...
    progress = [v.computed_prompt_tokens for v in prefilling]
    assert progress == [chunk * (i + 1) for i in range(len(progress))]
    assert len(progress) == (total - 1) // chunk  # the last chunk also yields the first token
    assert all(v.output_tokens == 0 and v.prompt_tokens == total for v in prefilling)
    assert final["long"].output_tokens == 3


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
