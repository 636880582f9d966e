"""vLLM's per-step counters, kept by a stat logger of stepview's own.

vLLM calls its stat loggers once per step, synchronously, with that step's
``SchedulerStats``/``IterationStats`` (in multiprocess mode too: the stats ride on the
outputs to the client). :class:`StatsSink` keeps the figures stepview shows; vLLM does not
call the loggers on a step where the scheduler was empty, so the engine marks the sink stale before
every step (``recorded = False``) and reads zero per-step figures from a stale sink.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class StatsSink:
    """What the stat logger saw in the current step; ``recorded`` is reset before each step."""

    __slots__ = (
        "ctx_tokens",
        "finished",
        "generation_tokens",
        "iteration",
        "kv_cache_usage",
        "preempted",
        "prefix_hits",
        "prefix_queries",
        "prompt_tokens",
        "recorded",
        "running",
        "waiting",
    )

    def __init__(self) -> None:
        self.recorded = False
        self.running = 0
        self.waiting = 0
        self.kv_cache_usage = 0.0
        self.ctx_tokens: int | None = None
        # The engine core's count of steps that scheduled tokens, this one included: the
        # scheduler plug-in's records carry the same count (StepFacts.iteration).
        self.iteration: int | None = None
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preempted = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        # The requests that finished in this step: caller id -> (prefill, decode seconds,
        # the iteration's wall-clock timestamp), from vLLM's FinishedRequestStats.
        self.finished: dict[str, tuple[float, float, float]] = {}

    def record(self, scheduler_stats: Any, iteration_stats: Any) -> None:
        """Keep this step's figures; a shape we do not know leaves them stale, never raises.

        Runs inside ``LLMEngine.step()``: an exception here would fail the step, and vLLM
        calls these stats classes unstable across versions.
        """
        try:
            self._record(scheduler_stats, iteration_stats)
        except Exception as exc:
            if not StatsSink._failed_once:
                StatsSink._failed_once = True
                log.warning("stepview: cannot read vLLM's stats (%s: %s)", type(exc).__name__, exc)

    _failed_once = False

    def _record(self, scheduler_stats: Any, iteration_stats: Any) -> None:
        self.recorded = True
        if scheduler_stats is not None:
            self.running = scheduler_stats.num_running_reqs
            # Deferred ("skipped") waiting requests are still in the waiting queue.
            self.waiting = scheduler_stats.num_waiting_reqs + getattr(
                scheduler_stats, "num_skipped_waiting_reqs", 0
            )
            self.kv_cache_usage = scheduler_stats.kv_cache_usage
            prefix = getattr(scheduler_stats, "prefix_cache_stats", None)
            if prefix is not None:
                if prefix.reset:
                    self.prefix_queries = self.prefix_hits = 0
                self.prefix_queries += prefix.queries
                self.prefix_hits += prefix.hits
            details = getattr(scheduler_stats, "iteration_details", None)
            self.ctx_tokens = None if details is None else details.num_ctx_tokens
            if details is None or getattr(details, "is_dummy", False):
                self.iteration = None
            else:
                self.iteration = details.iteration_index + 1
        else:
            self.ctx_tokens = self.iteration = None
        if iteration_stats is not None:
            self.prompt_tokens = iteration_stats.num_prompt_tokens
            self.generation_tokens = iteration_stats.num_generation_tokens
            self.preempted = iteration_stats.num_preempted_reqs
            done = iteration_stats.finished_requests
            stamp = iteration_stats.iteration_timestamp
            self.finished = {
                f.request_id: (f.prefill_time, f.decode_time, stamp)
                for f in done
                if f.request_id is not None
            }
        else:
            self.prompt_tokens = self.generation_tokens = self.preempted = 0
            self.finished = {}


def stat_logger_factory(sink: StatsSink) -> Callable[..., Any]:
    """A per-engine stat logger factory for ``LLMEngine.from_engine_args(stat_loggers=...)``."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _SinkStatLogger(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self._sink = sink

        def record(
            self,
            scheduler_stats: Any,
            iteration_stats: Any,
            mm_cache_stats: Any = None,
            engine_idx: int = 0,
        ) -> None:
            self._sink.record(scheduler_stats, iteration_stats)

        def log_engine_initialized(self) -> None:
            pass

    def factory(vllm_config: Any, engine_index: int = 0) -> Any:
        return _SinkStatLogger(vllm_config, engine_index)

    return factory
