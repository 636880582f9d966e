"""The :class:`~stepview.model.engine_api.Engine` protocol over vLLM's ``LLMEngine``.

Everything here uses vLLM's public API (``LLMEngine.from_engine_args``, ``add_request``,
``step``, ``abort_request``, stat loggers, ``scheduler_cls``); what only the scheduler knows
comes from stepview's scheduler plug-in (:mod:`stepview.engine.plugin.scheduler`, the one
module that reads private internals), through :mod:`stepview.engine.own.core_link` whether the
engine core runs in this process or in its own. vLLM is imported inside functions only, so
importing this module is cheap (the UI and CLI can import it before deciding to start an
engine).

Per-step cost is the point of the design, since this runs after every engine step:

* Token ids, prompt token ids and text are vLLM's live objects (CUMULATIVE output kind), passed
  through uncopied; the driver copies what it keeps before the next ``step()``.
* Sample logprobs are handed over as lazy views (:mod:`stepview.engine.own.vllm_logprobs`);
  prompt logprobs are converted once per request, on the first output that carries them, and
  the same tuple is handed out on every later output of that request.
* Counters come from a stat logger of stepview's own (:mod:`stepview.engine.own.vllm_stats`).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from stepview.engine.own.phases import PhaseHandler
from stepview.engine.own.shutdown import shutdown_llm_engine
from stepview.engine.own.vllm_logprobs import LogprobsView, convert_prompt_logprobs
from stepview.engine.own.vllm_stats import StatsSink, stat_logger_factory
from stepview.engine.own.vllm_times import StampReader
from stepview.insight.trace_context import TRACEPARENT, own_context
from stepview.model.chat import NO_CHAT_TEMPLATE, ChatMessage, chat_to_json
from stepview.model.engine_api import (
    ChatPrompt,
    CompletionUpdate,
    CoreHold,
    EngineRejected,
    OutputUpdate,
    SchedulerEntry,
    StepResult,
)
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineCounters, EngineInfo, PositionLogprobs

if TYPE_CHECKING:
    import vllm

    from stepview.engine.own.core_link import CoreLink
    from stepview.engine.records.entries import EntryReader
    from stepview.model.engine_api import Engine

log = logging.getLogger(__name__)


def _ignore_phase(phase: str) -> None:
    """Default ``on_phase``: start-up progress goes nowhere."""


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
        sink: StatsSink | None = None,
        link: CoreLink | None = None,
    ) -> None:
        import vllm
        from vllm.exceptions import VLLMClientError
        from vllm.outputs import RequestOutput
        from vllm.sampling_params import RequestOutputKind, SamplingParams

        from stepview.engine.plugin.client_side import client_id_lookup, process_core_hold
        from stepview.engine.records.entries import EntryReader

        self._engine: Any = llm_engine
        self._sink = sink
        self._link = link
        # Per-request scheduler states need the plug-in's records and the client's id map.
        lookup = client_id_lookup(llm_engine) if link is not None and link.available else None
        self._view: EntryReader | None = None if lookup is None else EntryReader(lookup)
        self._preemptions = 0  # seen in the records the last step read
        self._stamps = StampReader(getattr(llm_engine, "output_processor", None), sink)
        self.core_hold: CoreHold | None = process_core_hold(llm_engine)
        """Pause and single-step for a core in its own process (``None``: in-process)."""
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
        # vLLM exports its own llm_request spans (--otlp-traces-endpoint): each request gets a
        # trace context from stepview, so that span sits inside stepview's request span.
        observability = getattr(config, "observability_config", None)
        self._traced = bool(getattr(observability, "otlp_traces_endpoint", None))
        self._info = EngineInfo(
            model=model_label,
            demo_model=demo_model,
            vllm_version=str(vllm.__version__),
            max_model_len=int(config.model_config.max_model_len),
            max_num_seqs=int(config.scheduler_config.max_num_seqs),
            max_logprobs=int(config.model_config.max_logprobs),
            detailed_states=self._view is not None,
            chat_template=self._chat_tokenizer() is not None,
            block_size=int(config.cache_config.block_size or 0),
        )

    @classmethod
    def create(
        cls,
        engine_args: vllm.EngineArgs,
        *,
        demo_model: bool,
        model_label: str,
        on_phase: Callable[[str], None] = _ignore_phase,
        multiprocess: bool | None = None,
    ) -> VllmEngine:
        """Start an ``LLMEngine`` (seconds), reporting progress through ``on_phase``.

        ``engine_args`` is not modified; a copy gets per-step iteration details (they give
        the prompt tokens computed in each step), stats on (``disable_log_stats=True``
        would leave the counters empty) and stepview's scheduler plug-in as
        ``scheduler_cls``, chained over the user's own ``scheduler_cls`` if there is one (a
        class that is not a vLLM ``Scheduler`` is refused here with ``ValueError``). Our
        stat logger is added; vLLM's default logging stat logger is left out: with
        iteration details on it would write a log line per step, and our logger already
        keeps every figure stepview shows. Call
        :func:`stepview.engine.own.environment.prepare_vllm_environment` first.

        ``multiprocess``: run vLLM's engine core in its own process (vLLM's default) or in
        this one; ``None`` follows ``VLLM_ENABLE_V1_MULTIPROCESSING``. Start-up phases after
        "starting engine core" are only reported in-process (a core process logs on its own).

        Only one engine may be alive per process: vLLM's shutdown tears down process-global
        torch.distributed state, which breaks any other engine still running.
        """
        from stepview.engine.own.core_link import multiprocess_from_environment, open_link

        handler = PhaseHandler(on_phase)
        if "vllm" not in sys.modules:
            handler.phase("importing vLLM")
        from vllm import LLMEngine

        from stepview.engine.plugin.config import PLUGIN_QUALNAME, user_scheduler_base

        base = user_scheduler_base(getattr(engine_args, "scheduler_cls", None))
        if multiprocess is None:
            multiprocess = multiprocess_from_environment()

        vllm_logger = logging.getLogger("vllm")
        stats_logger = logging.getLogger("vllm.v1.metrics.loggers")
        saved_levels = (vllm_logger.level, stats_logger.level)
        if not vllm_logger.isEnabledFor(logging.INFO):
            vllm_logger.setLevel(logging.INFO)  # phases come from INFO messages
        # StatLoggerManager adds vLLM's LoggingStatLogger only if this logger is at INFO.
        stats_logger.setLevel(logging.WARNING)
        vllm_logger.addHandler(handler)
        _disable_tqdm_monitor()
        link = open_link(multiprocess)
        try:
            changes: dict[str, Any] = {"scheduler_cls": PLUGIN_QUALNAME}
            if not getattr(engine_args, "enable_logging_iteration_details", True):
                changes["enable_logging_iteration_details"] = True
            if getattr(engine_args, "disable_log_stats", False):
                # Without stats vLLM never calls our stat logger: no counters at all.
                log.info("stepview: ignoring --disable-log-stats (the counters need stats)")
                changes["disable_log_stats"] = False
            engine_args = dataclasses.replace(engine_args, **changes)
            sink = StatsSink()
            handler.phase("reading model config")
            with link.building(base):
                llm_engine = LLMEngine.from_engine_args(
                    engine_args, stat_loggers=[stat_logger_factory(sink)]
                )
        except BaseException:
            link.close()
            raise
        finally:
            vllm_logger.removeHandler(handler)
            vllm_logger.setLevel(saved_levels[0])
            stats_logger.setLevel(saved_levels[1])
        try:
            link.started()
            return cls(
                llm_engine, model_label=model_label, demo_model=demo_model, sink=sink, link=link
            )
        except BaseException:
            shutdown_llm_engine(llm_engine)
            link.close()
            raise

    # -- Engine protocol ------------------------------------------------------------------

    @property
    def info(self) -> EngineInfo:
        return self._info

    @property
    def facts_address(self) -> str | None:
        """Where the engine core publishes its scheduler records (multiprocess), else ``None``.

        Another subscriber (a recorder, a test) may connect there too.
        """
        address: str | None = getattr(self._link, "address", None)
        return address

    @property
    def llm_engine(self) -> Any:
        """The wrapped ``vllm.LLMEngine`` (``None`` after shutdown)."""
        return self._engine

    def add_request(
        self, request_id: str, prompt: str, spec: SamplingSpec, prompt_token_ids: Sequence[int] = ()
    ) -> str | None:
        """Queue a request; anything vLLM refuses becomes :class:`EngineRejected`.

        Token ids go in as vLLM's ``TokensPrompt`` (a dict), exactly as many tokens as given.
        When vLLM exports traces, the request gets a new trace whose root is the request span
        stepview exports (:func:`~stepview.insight.trace_context.own_context`): its
        ``traceparent`` goes to vLLM and is returned.
        """
        context = own_context(request_id) if self._traced else None
        headers = None if context is None else {TRACEPARENT: context}
        engine = self._require_engine()
        try:
            # SamplingSpec's fields are SamplingParams' own names: pass them all through.
            params = self._sampling_params(
                **spec.to_dict(),
                output_kind=self._cumulative,
            )
            engine_prompt: Any = (
                {"prompt_token_ids": list(prompt_token_ids)} if prompt_token_ids else prompt
            )
            engine.add_request(request_id, engine_prompt, params, trace_headers=headers)
        except self._rejected_types as exc:
            raise EngineRejected(str(exc) or type(exc).__name__) from exc
        return context

    def chat_prompt(self, messages: Sequence[ChatMessage]) -> ChatPrompt:
        """The tokenizer's chat template over ``messages``, as vLLM's ``LLM.chat`` renders it:
        the assistant's turn opened, the text tokenized without adding special tokens."""
        tokenizer = self._chat_tokenizer()
        if tokenizer is None:
            raise EngineRejected(NO_CHAT_TEMPLATE)
        text = tokenizer.apply_chat_template(
            chat_to_json(messages), add_generation_prompt=True, tokenize=False
        )
        return ChatPrompt(str(text), tuple(tokenizer.encode(text, add_special_tokens=False)))

    def abort(self, request_ids: list[str]) -> None:
        """Abort by the caller's ids (children of ``n > 1`` go too); unknown ids are ignored."""
        if not request_ids:
            return
        self._require_engine().abort_request(list(request_ids))
        for request_id in request_ids:
            self._prompt_logprobs.pop(request_id, None)
            self._stamps.forget(request_id)
        if self._view is not None:
            self._view.forget(request_ids)

    def has_unfinished(self) -> bool:
        return bool(self._require_engine().has_unfinished_requests())

    def step(self) -> StepResult:
        engine = self._require_engine()
        sink = self._sink
        if sink is not None:
            sink.recorded = False
        raw = engine.step()
        scheduled = self._scheduled()
        request_output = self._request_output
        outputs = tuple([self._convert(out) for out in raw if isinstance(out, request_output)])
        return StepResult(
            outputs=outputs,
            scheduled=scheduled,
            counters=self._counters(scheduled is not None),
            budget=None if scheduled is None or self._view is None else self._view.budget,
            queue_reasons=() if self._view is None else (self._view.queue_reason,),
            stamps=self._stamps.read(outputs),
        )

    def shutdown(self) -> None:
        """Stop the engine core and its executor; idempotent."""
        engine, self._engine = self._engine, None
        self._prompt_logprobs.clear()
        if engine is not None:
            shutdown_llm_engine(engine)
        link, self._link = self._link, None
        if link is not None:
            link.close()

    # -- internals ------------------------------------------------------------------------

    def _scheduled(self) -> dict[str, SchedulerEntry] | None:
        """The scheduler's entries that changed with this step, by caller id; ``None``
        without the plug-in.

        The records read are those up to the step whose outputs ``step()`` just returned (see
        :mod:`stepview.engine.own.core_link`: in its own process the core schedules ahead of
        them), every one of them in order, since each says what changed since the one before.
        No new record (an idle core schedules nothing): nothing changed.
        """
        view = self._view
        link = self._link
        if view is None or link is None or not link.available:
            return None
        sink = self._sink
        iteration = sink.iteration if sink is not None and sink.recorded else None
        records = link.take(iteration)
        self._preemptions = 0
        if not records:
            return {}
        if len(records) == 1:
            entries = view.read(records[0])
            self._preemptions = view.new_preemptions
            return entries
        entries = {}
        for facts in records:
            entries.update(view.read(facts))
            self._preemptions += view.new_preemptions
        return entries

    def _chat_tokenizer(self) -> Any:
        """The engine's tokenizer when it carries a chat template, else ``None``."""
        try:
            tokenizer = self._require_engine().get_tokenizer()
        except ValueError:  # skip_tokenizer_init: no tokenizer at all
            return None
        return tokenizer if getattr(tokenizer, "chat_template", None) else None

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

    def _counters(self, detailed: bool) -> EngineCounters:
        sink = self._sink
        preemptions = self._preemptions if detailed else 0
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
            # happens, so prefer that when the plug-in reports.
            preemptions=preemptions if detailed else sink.preempted,
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


if TYPE_CHECKING:

    def _satisfies_protocol(engine: VllmEngine) -> Engine:
        """mypy checks here that VllmEngine implements the Engine protocol."""
        return engine
