"""The :class:`~stepview.model.engine_api.Engine` protocol over vLLM's ``LLMEngine``.

Everything here uses vLLM's public API (``LLMEngine.from_engine_args``, ``add_request``,
``step``, ``abort_request``, stat loggers); the one look at private internals is delegated to
:mod:`stepview.engine.scheduler_probe`. vLLM is imported inside functions only, so importing
this module is cheap (the UI and CLI can import it before deciding to start an engine).

Per-step cost is the point of the design, since this runs after every engine step:

* Token ids, prompt token ids and text are vLLM's live objects (CUMULATIVE output kind), passed
  through uncopied; the driver copies what it keeps before the next ``step()``.
* Sample logprobs are handed over as :class:`LogprobsView`, a length-frozen view over vLLM's
  growing list that converts a position to a tuple of :class:`LogprobEntry` only when read,
  so a driver that copies just the new positions pays O(new tokens) per step, not O(length).
* Prompt logprobs are converted once per request, on the first output that carries them, and
  the same tuple is handed out on every later output of that request.

Counters come from a :class:`vllm.v1.metrics.loggers.StatLoggerBase` that keeps the last
``SchedulerStats``/``IterationStats``. vLLM does not call it on a step where the scheduler was
empty, so every step starts by marking the sink stale; a stale sink yields zero per-step
figures instead of repeating the last busy step's.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stepview.engine.scheduler_probe import SchedulerProbe
from stepview.model.engine_api import (
    CompletionUpdate,
    EngineRejected,
    OutputUpdate,
    StepResult,
)
from stepview.model.grow import PrefixView
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineCounters, EngineInfo, LogprobEntry, PositionLogprobs

if TYPE_CHECKING:
    import vllm

    from stepview.model.engine_api import Engine

log = logging.getLogger(__name__)


def _ignore_phase(phase: str) -> None:
    """Default ``on_phase``: start-up progress goes nowhere."""


# Start-up log messages of vLLM 0.32 (substrings of the unformatted message) -> the phase that
# begins when they appear. Unknown messages change nothing, so a later vLLM that rewords them
# only makes the phase coarser.
_PHASE_MESSAGES: tuple[tuple[str, str], ...] = (
    ("Resolved architecture", "reading model config"),
    ("Initializing a V1 LLM engine", "starting engine core"),
    ("Starting to load model", "loading weights"),
    ("Loading weights took", "allocating KV cache"),
    ("Memory profiling takes", "allocating KV cache"),
    ("init engine (profile, create kv cache, warmup model) took", "starting output processing"),
)


class _PhaseHandler(logging.Handler):
    """Turns vLLM's start-up log lines into ``on_phase`` calls (installed only during create)."""

    def __init__(self, on_phase: Callable[[str], None]) -> None:
        super().__init__(level=logging.INFO)
        self._on_phase = on_phase
        self._last = ""

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg if isinstance(record.msg, str) else str(record.msg)
        for needle, phase in _PHASE_MESSAGES:
            if needle in msg:
                self.phase(phase)
                return

    def phase(self, phase: str) -> None:
        if phase == self._last:
            return
        self._last = phase
        try:
            self._on_phase(phase)
        except Exception:  # a UI callback must not break engine start-up
            log.exception("stepview: on_phase callback failed")


class _StatsSink:
    """What the stat logger saw in the current step; ``recorded`` is reset before each step."""

    __slots__ = (
        "ctx_tokens",
        "generation_tokens",
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
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preempted = 0
        self.prefix_queries = 0
        self.prefix_hits = 0

    def record(self, scheduler_stats: Any, iteration_stats: Any) -> None:
        """Keep this step's figures; a shape we do not know leaves them stale, never raises.

        Runs inside ``LLMEngine.step()``: an exception here would fail the step, and vLLM
        calls these stats classes unstable across versions.
        """
        try:
            self._record(scheduler_stats, iteration_stats)
        except Exception as exc:
            if not _StatsSink._failed_once:
                _StatsSink._failed_once = True
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
        else:
            self.ctx_tokens = None
        if iteration_stats is not None:
            self.prompt_tokens = iteration_stats.num_prompt_tokens
            self.generation_tokens = iteration_stats.num_generation_tokens
            self.preempted = iteration_stats.num_preempted_reqs
        else:
            self.prompt_tokens = self.generation_tokens = self.preempted = 0


def _stat_logger_factory(sink: _StatsSink) -> Callable[..., Any]:
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


# -- logprobs --------------------------------------------------------------------------------


def convert_position(candidates: Any) -> PositionLogprobs:
    """vLLM's ``{token_id: Logprob}`` for one position -> tuple of entries, sampled token first.

    vLLM inserts the sampled token first, then the top-k; a dict keeps that order (a sampled
    token that is also in the top-k keeps its first slot).
    """
    return tuple(
        [LogprobEntry(tid, lp.logprob, lp.rank, lp.decoded_token) for tid, lp in candidates.items()]
    )


def _convert_flat_position(flat: Any, index: int) -> PositionLogprobs:
    """One position of a ``vllm.logprobs.FlatLogprobs``, read from its arrays (no dicts)."""
    start = flat.start_indices[index]
    end = flat.end_indices[index]
    token_ids = flat.token_ids
    logprobs = flat.logprobs
    ranks = flat.ranks
    decoded = flat.decoded_tokens
    seen: set[int] = set()
    out: list[LogprobEntry] = []
    for j in range(start, end):
        tid = token_ids[j]
        if tid in seen:  # the sampled token again, as a top-k member
            continue
        seen.add(tid)
        out.append(LogprobEntry(tid, logprobs[j], ranks[j], decoded[j]))
    return tuple(out)


class LogprobsView(PrefixView[PositionLogprobs]):
    """The first ``len`` positions of vLLM's live sample logprobs, converted on access.

    vLLM's list only ever grows, so positions below the length frozen at creation never
    change; the view is nonetheless meant to be read before the next ``step()``. Each read
    converts again: copy only the positions you do not have yet (``view[len(kept):]``).
    """

    __slots__ = ("_flat", "_live")

    def __init__(self, live: Any) -> None:
        super().__init__(len(live))
        self._live = live
        self._flat = hasattr(live, "start_indices")

    def _at(self, index: int) -> PositionLogprobs:
        if self._flat:
            return _convert_flat_position(self._live, index)
        return convert_position(self._live[index])


def convert_prompt_logprobs(prompt_logprobs: Any) -> tuple[PositionLogprobs | None, ...]:
    """All prompt positions at once (the first is ``None``: nothing precedes it)."""
    if hasattr(prompt_logprobs, "start_indices"):
        return tuple(
            _convert_flat_position(prompt_logprobs, i) or None for i in range(len(prompt_logprobs))
        )
    return tuple(None if c is None else convert_position(c) for c in prompt_logprobs)


# -- the engine ------------------------------------------------------------------------------


class VllmEngine:
    """vLLM's ``LLMEngine`` behind stepview's :class:`~stepview.model.engine_api.Engine`.

    All calls must come from one thread (vLLM's engine has no locks). Build it with
    :meth:`create`; the constructor wraps an engine that already exists (tests use it to
    compare against a bare ``LLMEngine``).
    """

    def __init__(
        self,
        llm_engine: Any,
        *,
        model_label: str,
        demo_model: bool = False,
        sink: _StatsSink | None = None,
    ) -> None:
        import vllm
        from vllm.exceptions import VLLMClientError
        from vllm.outputs import RequestOutput
        from vllm.sampling_params import RequestOutputKind, SamplingParams

        self._engine: Any = llm_engine
        self._sink = sink
        self._probe = SchedulerProbe(llm_engine)
        self._sampling_params = SamplingParams
        self._cumulative = RequestOutputKind.CUMULATIVE
        self._request_output = RequestOutput
        self._rejected_types: tuple[type[BaseException], ...] = (
            VLLMClientError,
            ValueError,
            TypeError,
        )
        self._prompt_logprobs: dict[str, tuple[PositionLogprobs | None, ...]] = {}
        self._idle_counters = EngineCounters()
        config = llm_engine.vllm_config
        self._info = EngineInfo(
            model=model_label,
            demo_model=demo_model,
            vllm_version=str(vllm.__version__),
            max_model_len=int(config.model_config.max_model_len),
            max_num_seqs=int(config.scheduler_config.max_num_seqs),
            max_logprobs=int(config.model_config.max_logprobs),
            detailed_states=self._probe.available,
        )

    @classmethod
    def create(
        cls,
        engine_args: vllm.EngineArgs,
        *,
        demo_model: bool,
        model_label: str,
        on_phase: Callable[[str], None] = _ignore_phase,
    ) -> VllmEngine:
        """Start an ``LLMEngine`` (seconds), reporting progress through ``on_phase``.

        ``engine_args`` is not modified; a copy gets per-step iteration details (they give
        the prompt tokens computed in each step) and stats on (``disable_log_stats=True``
        would leave the counters empty). Our stat logger is added; vLLM's default logging
        stat logger is left out: with iteration details on it would write a log line per
        step, and our logger already keeps every figure stepview shows. Call
        :func:`stepview.engine.environment.prepare_vllm_environment` first.

        Only one engine may be alive per process: vLLM's shutdown tears down process-global
        torch.distributed state, which breaks any other engine still running.
        """
        handler = _PhaseHandler(on_phase)
        if "vllm" not in sys.modules:
            handler.phase("importing vLLM")
        from vllm import LLMEngine

        vllm_logger = logging.getLogger("vllm")
        stats_logger = logging.getLogger("vllm.v1.metrics.loggers")
        saved_levels = (vllm_logger.level, stats_logger.level)
        if not vllm_logger.isEnabledFor(logging.INFO):
            vllm_logger.setLevel(logging.INFO)  # phases come from INFO messages
        # StatLoggerManager adds vLLM's LoggingStatLogger only if this logger is at INFO.
        stats_logger.setLevel(logging.WARNING)
        vllm_logger.addHandler(handler)
        _disable_tqdm_monitor()
        try:
            changes: dict[str, Any] = {}
            if not getattr(engine_args, "enable_logging_iteration_details", True):
                changes["enable_logging_iteration_details"] = True
            if getattr(engine_args, "disable_log_stats", False):
                # Without stats vLLM never calls our stat logger: no counters at all.
                log.info("stepview: ignoring --disable-log-stats (the counters need stats)")
                changes["disable_log_stats"] = False
            if changes:
                engine_args = dataclasses.replace(engine_args, **changes)
            sink = _StatsSink()
            handler.phase("reading model config")
            llm_engine = LLMEngine.from_engine_args(
                engine_args, stat_loggers=[_stat_logger_factory(sink)]
            )
        finally:
            vllm_logger.removeHandler(handler)
            vllm_logger.setLevel(saved_levels[0])
            stats_logger.setLevel(saved_levels[1])
        try:
            return cls(llm_engine, model_label=model_label, demo_model=demo_model, sink=sink)
        except BaseException:
            _shutdown_llm_engine(llm_engine)
            raise

    # -- Engine protocol ------------------------------------------------------------------

    @property
    def info(self) -> EngineInfo:
        return self._info

    @property
    def llm_engine(self) -> Any:
        """The wrapped ``vllm.LLMEngine`` (``None`` after shutdown)."""
        return self._engine

    def add_request(self, request_id: str, prompt: str, spec: SamplingSpec) -> None:
        """Queue a request; anything vLLM refuses becomes :class:`EngineRejected`."""
        engine = self._require_engine()
        try:
            # SamplingSpec's fields are SamplingParams' own names: pass them all through.
            params = self._sampling_params(
                **spec.to_dict(),
                output_kind=self._cumulative,
            )
            engine.add_request(request_id, prompt, params)
        except self._rejected_types as exc:
            raise EngineRejected(str(exc) or type(exc).__name__) from exc

    def abort(self, request_ids: list[str]) -> None:
        """Abort by the caller's ids (children of ``n > 1`` go too); unknown ids are ignored."""
        if not request_ids:
            return
        self._require_engine().abort_request(list(request_ids))
        for request_id in request_ids:
            self._prompt_logprobs.pop(request_id, None)
        self._probe.forget(request_ids)

    def has_unfinished(self) -> bool:
        return bool(self._require_engine().has_unfinished_requests())

    def step(self) -> StepResult:
        engine = self._require_engine()
        sink = self._sink
        if sink is not None:
            sink.recorded = False
        raw = engine.step()
        scheduled = self._probe.read()
        request_output = self._request_output
        outputs = tuple([self._convert(out) for out in raw if isinstance(out, request_output)])
        return StepResult(
            outputs=outputs,
            scheduled=scheduled,
            counters=self._counters(scheduled is not None),
        )

    def shutdown(self) -> None:
        """Stop the engine core and its executor; idempotent."""
        engine, self._engine = self._engine, None
        self._prompt_logprobs.clear()
        if engine is not None:
            _shutdown_llm_engine(engine)

    # -- internals ------------------------------------------------------------------------

    def _require_engine(self) -> Any:
        if self._engine is None:
            raise RuntimeError("the engine has been shut down")
        return self._engine

    def _convert(self, out: Any) -> OutputUpdate:
        request_id: str = out.request_id
        prompt_logprobs: tuple[PositionLogprobs | None, ...] | None = None
        raw_prompt_logprobs = out.prompt_logprobs
        if raw_prompt_logprobs is not None:
            prompt_logprobs = self._prompt_logprobs.get(request_id)
            if prompt_logprobs is None:
                prompt_logprobs = convert_prompt_logprobs(raw_prompt_logprobs)
                self._prompt_logprobs[request_id] = prompt_logprobs
        # Positional arguments: keywords make these calls twice as expensive, and they run
        # for every sample that moved, every step (field order: see engine_api).
        completions = tuple(
            [
                CompletionUpdate(
                    c.index,
                    c.text,
                    c.token_ids,
                    c.cumulative_logprob,
                    None if c.logprobs is None else LogprobsView(c.logprobs),
                    c.finish_reason,
                    c.stop_reason,
                )
                for c in out.outputs
            ]
        )
        finished = bool(out.finished)
        if finished and raw_prompt_logprobs is not None:
            self._prompt_logprobs.pop(request_id, None)
        return OutputUpdate(
            request_id, out.prompt_token_ids, prompt_logprobs, completions, finished
        )

    def _counters(self, probed: bool) -> EngineCounters:
        sink = self._sink
        preemptions = self._probe.new_preemptions if probed else 0
        if sink is None:
            return self._idle_counters
        if not sink.recorded:
            # The scheduler was empty: vLLM skipped the stat loggers this step.
            idle = self._idle_counters
            if (
                idle.prefix_cache_queries != sink.prefix_queries
                or idle.prefix_cache_hits != sink.prefix_hits
                or idle.preemptions != preemptions
            ):
                idle = EngineCounters(
                    prefix_cache_queries=sink.prefix_queries,
                    prefix_cache_hits=sink.prefix_hits,
                    preemptions=preemptions,
                )
                self._idle_counters = idle
            return idle
        return EngineCounters(
            running=sink.running,
            waiting=sink.waiting,
            kv_cache_usage=sink.kv_cache_usage,
            prompt_tokens=sink.ctx_tokens if sink.ctx_tokens is not None else sink.prompt_tokens,
            generation_tokens=sink.generation_tokens,
            prefix_cache_queries=sink.prefix_queries,
            prefix_cache_hits=sink.prefix_hits,
            # vLLM's own figure counts a preemption only when the request next produces
            # output (its events ride on outputs); the scheduler shows it in the step it
            # happens, so prefer that when the probe works.
            preemptions=preemptions if probed else sink.preempted,
        )


def _disable_tqdm_monitor() -> None:
    """Keep tqdm from starting its monitor thread, which would outlive the engine.

    vLLM's weight loader creates a (disabled) tqdm bar; tqdm starts a monitor thread for it
    and, for a disabled bar, never stops it. The monitor only tunes slow bars' refresh rate.
    """
    try:
        tqdm: Any = importlib.import_module("tqdm")
    except ImportError:
        return
    tqdm.tqdm.monitor_interval = 0


def _shutdown_llm_engine(engine: Any) -> None:
    """Shut down the engine core (in-process: the executor and its worker)."""
    core = getattr(engine, "engine_core", None)
    if core is not None:
        try:
            core.shutdown()
        except Exception:
            log.exception("stepview: vLLM engine shutdown failed")


if TYPE_CHECKING:

    def _satisfies_protocol(engine: VllmEngine) -> Engine:
        """mypy checks here that VllmEngine implements the Engine protocol."""
        return engine
