"""Scripted situations a scheduler meets in production, each run on a fresh :class:`Rig`
and checked step by step by a :class:`Checker`.

``python -m tests.conformance.situations`` runs them all (:data:`SITUATIONS`, each from the
first release that can have it on) with whichever vLLM is first on the path, over
``Scheduler`` and then over ``AsyncScheduler``, and prints one JSON line per situation (its
figures, or the first mismatch, or why it cannot happen there), then ``{"vllm": VERSION,
"async": BOOL, "ok": BOOL}`` for each class; exit 1 if any failed. The test
(``test_scheduler_conformance.py``) runs it once per release, since one process can import
only one vLLM (and importing it is most of the time a release takes: the situations
themselves take milliseconds).
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final, NamedTuple

from stepview.engine.plugin.selfcheck import BLOCK_SIZE
from stepview.engine.records.request_states import STATUSES, CoreState, Standing
from stepview.engine.records.vllm_versions import TESTED_RELEASES
from stepview.model.scheduling import DEFERRED
from tests.conformance.checks import Checker, Mismatch
from tests.conformance.rig import Rig, Setting, release, version

CONNECTOR = "tests.conformance.connector:FakeConnector"


def prompt(seed: int, length: int) -> list[int]:
    return [10 + (seed * 7 + i) % 900 for i in range(length)]


def drive(checker: Checker, limit: int = 200) -> None:
    """Step until the scheduler is empty (at most ``limit`` steps)."""
    while checker.rig.scheduler.has_requests():
        if checker.steps >= limit:
            raise Mismatch(f"the scheduler still held requests after {limit} steps")
        checker.step()


def request_statuses(setting: Setting) -> Checker:
    """The release's own request statuses are the table's (stepview's vocabulary of vLLM's
    states): every unfinished one named there, each row the release should have present, and
    blocked exactly where vLLM's scheduler says so (``_is_blocked_waiting_status``). A status a
    new release adds fails here first, by name."""
    from vllm.v1.request import RequestStatus

    checker = Checker(Rig(setting))
    is_blocked = type(checker.rig.scheduler)._is_blocked_waiting_status
    unfinished = {s.name: s for s in RequestStatus if not RequestStatus.is_finished(s)}
    rows = {row.name: row for row in STATUSES if row.since <= release()}
    if sorted(unfinished) != sorted(rows):
        raise Mismatch(f"vLLM {version()}'s unfinished statuses {sorted(unfinished)}, "
                       f"the table's {sorted(rows)}")  # fmt: skip
    for name, row in rows.items():
        if (row.standing is Standing.BLOCKED) != bool(is_blocked(unfinished[name])):
            raise Mismatch(f"{name}: {row.standing.value} in the table, vLLM says otherwise")
    return checker


def slots_full(setting: Setting) -> Checker:
    """More requests than running slots: the rest wait for a slot, then run."""
    checker = Checker(Rig(replace(setting, max_num_seqs=2)))
    for i in range(5):
        checker.rig.add(f"r{i}", prompt(i, 20), 4)
    drive(checker)
    return checker


def token_budget(setting: Setting) -> Checker:
    """A budget smaller than the prompts: chunked prefill over several steps, decodes first."""
    checker = Checker(Rig(replace(setting, token_budget=48)))
    for i in range(3):
        checker.rig.add(f"r{i}", prompt(i, 100), 3)
    drive(checker)
    return checker


def kv_full(setting: Setting) -> Checker:
    """A KV cache too small for every request's growth: a preemption, then the resume."""
    checker = Checker(Rig(replace(setting, num_blocks=9)))  # 8 usable: 128 tokens
    for i in range(3):
        checker.rig.add(f"r{i}", prompt(i, 30), 40)
    drive(checker)
    if checker.preemptions == 0:
        raise Mismatch("no preemption: the situation did not happen")
    return checker


def prefix_hit(setting: Setting) -> Checker:
    """A second request sharing the first's prefix, with prefix caching on."""
    checker = Checker(Rig(replace(setting, prefix_caching=True)))
    shared = prompt(1, 4 * BLOCK_SIZE)
    checker.rig.add("first", [*shared, 7], 2)
    checker.step()
    checker.step()
    checker.rig.add("second", [*shared, 8], 2)
    drive(checker)
    second = [f for r in checker.rig.records for f in r.requests if f.req_id == "second"]
    if not any(f.num_cached_tokens >= 4 * BLOCK_SIZE - BLOCK_SIZE for f in second):
        raise Mismatch(
            f"the second request's cached tokens: {[f.num_cached_tokens for f in second]}"
        )
    return checker


def parallel_samples(setting: Setting) -> Checker:
    """``n>1``: vLLM's front end hands the engine core one request per sample
    (``<i>_<parent id>``) at once, each with the parent's prompt and sampling. Each sample is
    recorded and ends on its own, and a watch reads the ids as samples of one request."""
    from stepview.engine.records.facts import split_internal_id

    checker = Checker(Rig(replace(setting, prefix_caching=True)))
    shared = prompt(3, 3 * BLOCK_SIZE)
    samples = [f"{i}_cmpl-par-0-0123abcd" for i in range(3)]
    for sample in samples:
        checker.rig.add(sample, shared, 4)
    drive(checker)
    parents = {split_internal_id(sample) for sample in checker.ended}
    if parents != {("cmpl-par-0", i) for i in range(3)}:
        raise Mismatch(f"the samples read as {sorted(parents, key=str)}")
    return checker


def abort_mid_prefill(setting: Setting) -> Checker:
    """An abort while a long prompt is half prefilled, another request running on."""
    checker = Checker(Rig(replace(setting, token_budget=32)))
    checker.rig.add("long", prompt(1, 120), 4)
    checker.rig.add("short", prompt(2, 8), 6)
    checker.step()
    checker.step()
    checker.abort(["long"])
    drive(checker)
    return checker


class NotApplicable(Exception):
    """The release lacks what the situation needs: it cannot happen there. A situation is
    not run on a release before its :attr:`Situation.since`; raised on a later one, the
    conformance test fails on it (a release's own scheduling is never reported checked when
    it was not)."""


def configured(setting: Setting, **options: Any) -> Rig:
    """A rig with ``options`` (``SchedulerConfig`` fields some releases lack)."""
    from vllm.config import SchedulerConfig

    missing = [name for name in options if name not in SchedulerConfig.__dataclass_fields__]
    if missing:
        raise NotApplicable(f"vLLM {version()}'s scheduler has no {', '.join(missing)}")
    return Rig(replace(setting, options=tuple(options.items())))


def prefill_cadence(setting: Setting) -> Checker:
    """0.33 on: ``prefill_schedule_interval`` holds a prefill in progress on the steps off its
    cadence while decodes run, a running request left unscheduled for a step (records must
    not carry its last step's tokens forward)."""
    checker = Checker(configured(replace(setting, token_budget=32), prefill_schedule_interval=3))
    checker.rig.add("short", prompt(1, 8), 16)
    checker.step()
    checker.step()
    checker.rig.add("long", prompt(2, 150), 3)
    drive(checker)
    if not checker.unscheduled.get("long"):
        raise Mismatch(f"the prefill was never held: {checker.unscheduled}")
    return checker


def cache_aware_admission(setting: Setting) -> Checker:
    """0.34 on: cache-aware admission lets a waiting request whose prefix is cached go
    before one that arrived earlier (the head of ``waiting`` reordered)."""
    rig = configured(
        replace(setting, max_num_seqs=1, prefix_caching=True),
        cache_aware_admission_window=4,
        cache_aware_admission_threshold=0.0,
    )
    checker = Checker(rig)
    shared = prompt(3, 4 * BLOCK_SIZE)
    checker.rig.add("warm", [*shared, 5], 2)
    drive(checker)
    checker.rig.add("blocker", prompt(4, 8), 6)
    checker.step()
    checker.rig.add("cold", prompt(5, 4 * BLOCK_SIZE + 1), 2)
    checker.rig.add("hot", [*shared, 6], 2)
    drive(checker)
    if checker.first_scheduled["hot"] > checker.first_scheduled["cold"]:
        raise Mismatch(f"no reordering happened: {checker.first_scheduled}")
    if checker.rig.records[-1].cache_aware_window != 4:  # "first come, first served" no more
        raise Mismatch(f"the window, as recorded: {checker.rig.records[-1].cache_aware_window}")
    return checker


def one_step_ahead(setting: Setting) -> Checker:
    """Async scheduling as vLLM's engine core runs it with a batch queue: each step is
    scheduled before the previous one's outputs are in (placeholders for its tokens)."""
    checker = Checker(Rig(replace(setting, max_num_seqs=3, token_budget=64)))
    for i in range(4):
        checker.rig.add(f"r{i}", prompt(i, 40), 6)
    pending = None
    while checker.rig.scheduler.has_requests() and checker.steps < 200:
        output = checker.step(update=False)
        if pending is not None:
            checker.update(pending)
        pending = output
    if pending is not None:
        checker.update(pending)
    return checker


def remote_kv_loads(setting: Setting) -> Checker:
    """A KV connector loading two prompts asynchronously (``WAITING_FOR_REMOTE_KVS``, their
    blocks taken before they run) beside a request that computes its own."""
    checker = Checker(Rig(replace(setting, kv_connector=CONNECTOR)))
    for i in range(2):
        checker.rig.add(f"load{i}", prompt(i, 50), 2)
    checker.rig.add("plain", prompt(3, 20), 2)
    drive(checker)
    if CoreState.WAITING_FOR_REMOTE_KVS not in checker.states_seen:
        raise Mismatch("no request waited for its KV load: the situation did not happen")
    return checker


def kv_load_cap(setting: Setting) -> Checker:
    """0.34 on: with ``max_num_inflight_kv_loads=1``, the second of two loads waits at the head
    of the KV-load queue (``async_kv_waiting``) while the first is in flight, for the cap and
    not the KV cache; a request needing no load goes on past it."""
    checker = Checker(
        configured(replace(setting, kv_connector=CONNECTOR), max_num_inflight_kv_loads=1)
    )
    for i in range(2):
        checker.rig.add(f"load{i}", prompt(i, 50), 2)
    checker.rig.add("plain", prompt(3, 20), 2)
    checker.step()
    held = [r.request_id for r in checker.rig.scheduler.async_kv_waiting]
    if held != ["load1"]:
        raise Mismatch(f"the KV-load queue after the first step: {held}, not load1 held")
    reason = checker.reasons()["load1"]
    if reason is None or reason.code != DEFERRED or "KV-load cap" not in reason.text:
        raise Mismatch(f"load1, held at the KV-load cap, waits for: {reason}")
    drive(checker)
    return checker


def kv_load_stops_the_scan(setting: Setting) -> Checker:
    """0.34 on: the head of the KV-load queue, first by arrival, finds too few free blocks for
    its load: vLLM's scan stops there, so a later request in ``waiting`` waits behind it."""
    small = replace(setting, kv_connector=CONNECTOR, num_blocks=9)  # 8 usable: 128 tokens
    checker = Checker(configured(small, max_num_inflight_kv_loads=2))
    checker.rig.add("big", prompt(0, 100), 20)
    checker.step()
    checker.rig.add("load0", prompt(1, 50), 2)
    checker.rig.add("plain", prompt(2, 20), 2)
    checker.step()
    reason = checker.reasons()["plain"]
    if reason is None or reason.blocker != "load0":
        raise Mismatch(f"plain, behind load0 (the scan stopped at its load), waits for: {reason}")
    drive(checker)
    return checker


def pause_and_resume(setting: Setting) -> Checker:
    """vLLM's ``pause_scheduler``: paused for new requests (PAUSED_NEW) the running one runs
    on and one that arrives waits, for the pause (not behind anyone, nor for the KV cache);
    paused whole (PAUSED_ALL) nothing is scheduled; then the resume."""
    from vllm.v1.core.sched.interface import PauseState

    checker = Checker(Rig(setting))
    scheduler = checker.rig.scheduler
    checker.rig.add("running", prompt(0, 20), 8)
    checker.step()
    for state in (PauseState.PAUSED_NEW, PauseState.PAUSED_ALL):
        scheduler.set_pause_state(state)
        checker.rig.add(f"new{int(state)}", prompt(int(state), 20), 2)
        checker.step()
        reasons = checker.reasons()
        if {r.text.split(":")[0] for r in reasons.values() if r} != {"vLLM's scheduler is paused"}:
            raise Mismatch(f"paused ({state.name}), the waiting wait for: {reasons}")
    scheduler.set_pause_state(PauseState.UNPAUSED)
    drive(checker)
    return checker


class Situation(NamedTuple):
    """One situation of :data:`SITUATIONS`: how to drive it, and from which release on."""

    run: Callable[[Setting], Checker]
    since: tuple[int, int] = TESTED_RELEASES[0]  # the first vLLM release that can have it


SITUATIONS: Final = {
    "vLLM's request statuses, as stepview's table has them": Situation(request_statuses),
    "running slots full": Situation(slots_full),
    "token budget spent, chunked prefill": Situation(token_budget),
    "KV cache full: preemption and resume": Situation(kv_full),
    "prefix-cache hit": Situation(prefix_hit),
    "n>1: parallel samples": Situation(parallel_samples),
    "abort mid-prefill": Situation(abort_mid_prefill),
    "one step ahead (async scheduling)": Situation(one_step_ahead),
    "prefill held by its cadence": Situation(prefill_cadence, since=(0, 33)),
    "cache-aware admission": Situation(cache_aware_admission, since=(0, 34)),
    "remote KV loads (a KV connector)": Situation(remote_kv_loads),
    "KV-load queue and its in-flight cap": Situation(kv_load_cap, since=(0, 34)),
    "a KV load stops the scan": Situation(kv_load_stops_the_scan, since=(0, 34)),
    "pause and resume": Situation(pause_and_resume),
}
"""Every situation, by name: the one list of them (the conformance test reads it too: each
runs on every release from its ``since`` on, and on no earlier one)."""


def run_all(async_scheduling: bool, tag: dict[str, Any] | None = None) -> bool:
    """Every situation, one JSON line each (starting with ``tag``), then the summary line."""
    setting = Setting(async_scheduling=async_scheduling)
    ok = True
    for name, situation in SITUATIONS.items():
        line: dict[str, Any] = {**(tag or {}), "situation": name}
        try:
            if release() < situation.since:
                first = f"{situation.since[0]}.{situation.since[1]}"
                raise NotApplicable(f"vLLM {version()} is older than {first}")
            checker = situation.run(setting)
            line.update(checker.finish(), base=checker.rig.base, ok=True, applies=True)
            checker.rig.close()
        except NotApplicable as exc:
            line.update(ok=True, applies=False, why=str(exc))
        except Mismatch as exc:
            ok = False
            line.update(ok=False, mismatch=str(exc))
        except Exception:
            ok = False
            line.update(ok=False, error=traceback.format_exc(limit=-4))
        print(json.dumps(line), flush=True)
    summary = {**(tag or {}), "vllm": version(), "async": async_scheduling, "ok": ok}
    print(json.dumps(summary), flush=True)
    return ok


def main() -> int:
    """Every situation over ``Scheduler``, then over ``AsyncScheduler``."""
    results = [run_all(mode, tag={"async": mode}) for mode in (False, True)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
