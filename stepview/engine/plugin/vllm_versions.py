"""The plug-in and the vLLM version it runs in: what it reads, the rules that apply, the off switch.

The rules that differ between vLLM versions are named in
:mod:`stepview.engine.records.vllm_versions`; this module applies them to a live scheduler
(whether this step holds prefills), lists what the capture reads from vLLM's scheduler so a
vLLM without it is found when the scheduler is built, not mid-run, and tells whoever listens
that the plug-in switched itself off: the in-process listener's binding, or each subscriber of
a publisher, with one record carrying the reason.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

import vllm.version
import zmq

from stepview.engine.plugin.config import ListenerSink
from stepview.engine.plugin.publisher import FactsPublisher
from stepview.engine.plugin.waiting_head import READS_KV_LOADS
from stepview.engine.records.channel import FactsSink
from stepview.engine.records.facts import StepFacts
from stepview.engine.records.vllm_versions import SchedulerRules, rules_for, untested_warning

log = logging.getLogger("stepview.engine.plugin")

RUNNING = str(getattr(vllm.version, "__version__", ""))  # what this process runs
RULES = rules_for(RUNNING)

# What the capture reads from vLLM's scheduler, whatever the version ...
READS = (
    "requests",
    "waiting",
    "kv_holding_waiting",
    "deferred_waiting",
    "running",
    "finished_req_ids",
    "get_request_counts",
    "max_num_scheduled_tokens",
    "max_num_running_reqs",
    "num_waiting_for_streaming_input",
    "block_size",
    "kv_cache_manager",
    "scheduler_config",
    "lora_config",
    "policy",
    "parallel_config",
    "prefill_capacity_bound",
    "pause_state",
)
# ... and with a scheduler that keeps its own prefill cadence (0.33 on).
READS_LOCAL_CADENCE = ("local_prefill_interval", "num_executed_steps", "last_prefill_step")

_warned = False


class MissingInternals(Exception):
    """This vLLM's scheduler lacks something the capture reads (the message says what)."""


def check_scheduler(scheduler: Any, version: str = RUNNING) -> None:
    """Warn once per process on an untested vLLM; raise :class:`MissingInternals` when the
    scheduler lacks what the capture reads (the plug-in then switches itself off)."""
    global _warned
    warning = untested_warning(version, "this vLLM server")
    if warning is not None and not _warned:
        _warned = True
        log.warning("stepview: %s", warning)
    rules = rules_for(version)
    reads = READS + (READS_LOCAL_CADENCE if rules.local_prefill_interval else ())
    # The KV-load queue's reads only where it is in use (a KV connector and a load cap).
    config = getattr(scheduler, "scheduler_config", None)
    if rules.kv_load_queue and getattr(config, "max_num_inflight_kv_loads", None):
        reads += READS_KV_LOADS
    # Looked up without being read: a property is not run at start-up (nor anything it reads).
    held = getattr(scheduler, "__dict__", {})
    missing = [name for name in reads if name not in held and not hasattr(type(scheduler), name)]
    if missing:
        raise MissingInternals(f"vLLM {version}'s scheduler has no {', '.join(missing)}")


def settings(
    scheduler_config: Any, chunked: bool, cap: int, loras: int, priority: bool
) -> dict[str, Any]:
    """The record's fields that name the scheduler's settings (read once) and the version."""
    return {
        "chunked_prefill": chunked,
        "long_prefill_threshold": cap,
        "max_loras": loras,
        "priority_policy": priority,
        "vllm_version": RUNNING,
        "prefill_interval": int(getattr(scheduler_config, "prefill_schedule_interval", 1)),
    }


def prefills_held(scheduler: Any, throttle: bool, rules: SchedulerRules = RULES) -> bool:
    """Whether ``schedule(throttle)``, about to run, holds prefills for the prefill cadence.

    Read before ``schedule()``: it moves the cadence. Both versions hold only while a request
    decodes and the last released step drained the queue (``prefill_capacity_bound`` off);
    0.32 holds when the data-parallel engine core says so (``throttle``), 0.33 also on its own
    count of steps since the last prefill. O(1) but for the scan of ``running``, which stops at
    the first decoding request, and which only runs when the cadence is on.
    """
    if scheduler.prefill_capacity_bound:
        return False
    held = throttle
    if not held and rules.local_prefill_interval:
        interval: int = scheduler.local_prefill_interval
        held = interval > 1 and scheduler.num_executed_steps + 1 - scheduler.last_prefill_step < (
            interval
        )
    return held and any(not r.is_prefill_chunk for r in scheduler.running)


def failure_text(exc: Exception) -> str:
    """The reason the plug-in is off, as the log, the listener and subscribers get it."""
    if isinstance(exc, MissingInternals):
        return str(exc)
    return f"{type(exc).__name__}: {exc} (vLLM {RUNNING})"


def announce_off(sink: FactsSink | None, reason: str, started: float, rank: int) -> None:
    """Tell whoever listens that the plug-in is off and why, then let go of ``sink``."""
    if isinstance(sink, ListenerSink):
        sink.binding.failure = reason
    elif isinstance(sink, FactsPublisher):
        record = off_record(reason, started, rank)
        threading.Thread(
            target=_answer_subscribers,
            args=(sink, record),
            name="stepview-plugin-off",
            daemon=True,
        ).start()
        return
    if sink is not None:
        with contextlib.suppress(Exception):
            sink.close()


def off_record(reason: str, started: float, rank: int) -> StepFacts:
    """The record a subscriber gets in place of steps: no step, only the reason."""
    return StepFacts(
        0, 0, time.time(), started, rank, 0, False, 0, 0, 0, 0, 0, 0, 0, 0, 0, [], [], [],
        idle=True, vllm_version=RUNNING, plugin_off=reason,
    )  # fmt: skip


def _answer_subscribers(publisher: FactsPublisher, record: StepFacts) -> None:
    """Send ``record`` to each new subscriber, for the life of the process.

    The scheduling thread no longer touches the publisher once the plug-in is off, so this
    thread owns its socket; it wakes on subscriptions only (an idle server schedules nothing,
    and a subscriber must hear the reason anyway).
    """
    with contextlib.suppress(zmq.ZMQError):
        while True:
            publisher.fresh = False
            if publisher.wanted():
                publisher.deliver(record)
            while not publisher.fresh:
                time.sleep(0.2)
                publisher.wanted()
