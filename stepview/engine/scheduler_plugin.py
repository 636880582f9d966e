"""stepview's scheduler plug-in for vLLM's engine core: the one module that reads vLLM internals.

vLLM's public API says what a request *produced*; whether it is still queued, how far its
chunked prefill has got, or that it was preempted lives only in the V1 scheduler, which runs
in the engine core: in the caller's process with ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, in a
process of its own otherwise (vLLM's default, and ``vllm serve``). vLLM builds its scheduler
from a class named by ``--scheduler-cls`` / ``EngineArgs.scheduler_cls``, inside the engine
core process, so stepview ships one: :class:`StepviewScheduler`
(``stepview.engine.scheduler_plugin.StepviewScheduler``).

After every ``schedule()`` it builds a :class:`~stepview.model.core_facts.StepFacts` with
every request the scheduler holds and hands it to one sink:

* an **in-process listener** registered with :func:`local_listener` while the engine is built
  (stepview's own engine with the core in its process): a plain call, no encoding; or
* a **publisher** when ``STEPVIEW_PUBLISH`` names a zmq address
  (:mod:`stepview.engine.facts_channel`; data-parallel ranks each publish on
  :func:`~stepview.engine.facts_channel.rank_address` of it). Nothing is built while nobody
  is subscribed: a server with the plug-in and no stepview attached pays a clock read per step.

When the scheduler empties (the last requests finished or were aborted) it sends one more,
``idle`` record: an idle core stops scheduling, and subscribers must still learn who left.

The plug-in never raises into vLLM: a capture that fails logs once and switches the plug-in
off for the rest of the run (vLLM keeps serving, stepview falls back to what outputs tell).

Base class: the plug-in is built over the class vLLM itself would have picked
(``AsyncScheduler`` when async scheduling is on, as it is by default on GPUs; ``Scheduler``
otherwise, always on CPU), or over the class named by ``STEPVIEW_SCHEDULER_BASE``
(``package.module.Class``), so a user's own scheduler keeps working under stepview. A base
that is not a vLLM ``Scheduler`` subclass is refused with a clear error at start-up.

The client side lives here too (:func:`client_id_lookup`): vLLM's engine core only knows its
own request ids; the ``LLMEngine``'s output processor maps them back to the caller's.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.request import RequestStatus

from stepview.engine.facts_channel import (
    BASE_ENV,
    PUBLISH_ENV,
    FactsPublisher,
    FactsSink,
    rank_address,
)
from stepview.model.core_facts import CoreState, RequestFacts, RequestIntro, StepFacts

log = logging.getLogger(__name__)

PLUGIN_QUALNAME = "stepview.engine.scheduler_plugin.StepviewScheduler"

_PREEMPTED = RequestStatus.PREEMPTED
_STATE_OF: dict[Any, int] = {
    RequestStatus.WAITING: CoreState.WAITING,
    RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR: CoreState.WAITING_FOR_GRAMMAR,
    RequestStatus.WAITING_FOR_REMOTE_KVS: CoreState.WAITING_FOR_REMOTE_KVS,
    RequestStatus.WAITING_FOR_STREAMING_REQ: CoreState.WAITING_FOR_STREAMING_REQ,
    RequestStatus.RUNNING: CoreState.RUNNING,
    RequestStatus.PREEMPTED: CoreState.PREEMPTED,
}
_OTHER = int(CoreState.OTHER)
_NO_TOKENS: list[int] = []  # shared by every record that has no new token (never mutated)


# -- the in-process listener ---------------------------------------------------------------


@dataclass
class LocalBinding:
    """A listener registered in this process, and what the plug-in reports back to it."""

    callback: Callable[[StepFacts], None]
    bound: bool = False  # a StepviewScheduler picked it up
    failure: str | None = None  # why the plug-in switched itself off


_local: LocalBinding | None = None


@contextlib.contextmanager
def local_listener(callback: Callable[[StepFacts], None]) -> Iterator[LocalBinding]:
    """Hand the records of a scheduler built inside this block to ``callback``, in-process.

    Wrap ``LLMEngine.from_engine_args`` in it: with the engine core in this process the
    scheduler is built there and binds the callback for its whole life. With the core in its
    own process nothing binds (``bound`` stays False).
    """
    global _local
    binding = LocalBinding(callback)
    previous, _local = _local, binding
    try:
        yield binding
    finally:
        _local = previous


class _ListenerSink:
    """The in-process listener as a sink: always wanted, records handed over as they are."""

    __slots__ = ("binding", "deliver")

    def __init__(self, binding: LocalBinding) -> None:
        binding.bound = True
        self.binding = binding
        self.deliver = binding.callback

    fresh = False  # the listener gets every record: nothing to resend

    def wanted(self) -> bool:
        return True

    def close(self) -> None:
        pass


# -- capture ---------------------------------------------------------------------------------


class CoreCapture:
    """Builds the records from a scheduler's state and hands them to the sink.

    Separate from the scheduler class so the rules run on a fake scheduler in tests. Cost is
    the point: one pass over ``scheduler.requests`` with plain attribute reads, one struct
    per request, nothing at all while the sink does not want records.
    """

    def __init__(self, scheduler: Any) -> None:
        self.sink: FactsSink | None = None  # set by the owner once the capture works
        self.failure: str | None = None
        self.step = 0
        self.iteration = 0
        self.started = time.time()
        self._cached: dict[str, int] = {}  # prefix-cache hits: vLLM drops them at 1st token
        self._reported: set[str] = set()  # finished ids already sent in an idle record
        # Output tokens already sent, by request: records carry only the rest (and a request
        # absent here gets its intro). Cleared when someone (re)subscribes.
        self._sent: dict[str, int] = {}
        self._groups: list[Mapping[str, list[Any]]] = []
        self.rank = 0
        try:
            parallel = scheduler.parallel_config
            rank = getattr(parallel, "data_parallel_index", None)
            self.rank = int(getattr(parallel, "data_parallel_rank", 0) if rank is None else rank)
            manager = scheduler.kv_cache_manager
            self._pool = manager.block_pool
            # req_to_blocks of each KV cache group (defaultdicts: only ever .get() them).
            self._groups = [m.req_to_blocks for m in manager.coordinator.single_type_managers]
        except Exception as exc:  # another vLLM: vLLM runs on, without the plug-in
            self._switch_off(exc)

    def after_schedule(self, scheduler: Any, output: Any) -> None:
        """One record per ``schedule()`` that had anything to schedule or report."""
        try:
            reported, self._reported = self._reported, set()
            total = output.total_num_scheduled_tokens
            if total == 0 and not any(scheduler.get_request_counts()):
                return  # the bookkeeping step that passes finished ids to the workers
            self.step += 1
            if total:
                self.iteration += 1
            sink = self.sink
            if sink is None or not sink.wanted():
                return
            finished = sorted(i for i in output.finished_req_ids if i not in reported)
            preempted = sorted(output.preempted_req_ids)
            sink.deliver(
                self.capture(scheduler, output.num_scheduled_tokens, finished, preempted, False)
            )
        except Exception as exc:  # never into vLLM
            self._switch_off(exc)

    def after_finish(self, scheduler: Any) -> None:
        """After outputs or aborts: the idle record, when the scheduler has just emptied."""
        try:
            sink = self.sink
            if sink is None or any(scheduler.get_request_counts()):
                return
            finished = sorted(i for i in scheduler.finished_req_ids if i not in self._reported)
            if finished and sink.wanted():
                self._reported.update(finished)
                sink.deliver(self.capture(scheduler, {}, finished, [], True))
        except Exception as exc:  # never into vLLM
            self._switch_off(exc)

    def _switch_off(self, exc: Exception) -> None:
        """Stop capturing for good and say so once: vLLM keeps running as if unplugged."""
        self.failure = f"{type(exc).__name__}: {exc}"
        sink, self.sink = self.sink, None
        log.error("stepview: scheduler plug-in switched off (%s)", self.failure)
        if isinstance(sink, _ListenerSink):
            sink.binding.failure = self.failure
        if sink is not None:
            with contextlib.suppress(Exception):
                sink.close()

    def capture(
        self,
        scheduler: Any,
        scheduled: Mapping[str, int],
        finished: list[str],
        preempted: list[str],
        idle: bool,
    ) -> StepFacts:
        """The record of the scheduler's state now (after ``schedule()``)."""
        cached = self._cached
        sent = self._sent
        sink = self.sink
        if sink is not None and sink.fresh:
            sink.fresh = False
            sent.clear()
        for request_id in finished:
            cached.pop(request_id, None)
            sent.pop(request_id, None)
        requests = scheduler.requests
        if len(cached) > len(requests) + 256:  # finishes nobody listened to
            self._cached = cached = {k: v for k, v in cached.items() if k in requests}
        if len(sent) > len(requests) + 256:
            self._sent = sent = {k: v for k, v in sent.items() if k in requests}
        sent_get = sent.get
        no_tokens = _NO_TOKENS
        groups = self._groups
        single = groups[0] if len(groups) == 1 else None
        deferred = scheduler.deferred_waiting
        state_of = _STATE_OF
        preempted_status = _PREEMPTED
        prefill = decode = 0
        facts: list[RequestFacts] = []
        for request_id, req in requests.items():
            status = req.status
            if status > preempted_status:  # finished, its blocks not freed yet
                continue
            computed: int = req.num_computed_tokens
            prompt: int = req.num_prompt_tokens
            outputs: int = req.num_output_tokens
            now_scheduled = scheduled.get(request_id, 0)
            if now_scheduled:
                # Decode: only the newest token was left to compute (with async scheduling,
                # placeholders put computed ahead of the tokens known so far).
                if outputs and computed - now_scheduled >= prompt + outputs - 1:
                    decode += now_scheduled
                else:
                    prefill += now_scheduled
            stats = req.prefill_stats
            if stats is not None:
                hit: int = stats.num_cached_tokens
                if hit:
                    cached[request_id] = hit
            else:
                hit = cached.get(request_id, 0)
            if single is not None:
                blocks = len(single.get(request_id, ()))
            else:
                blocks = sum(len(g.get(request_id, ())) for g in groups)
            had = sent_get(request_id, -1)
            intro = None
            if had < 0:
                intro = _intro(req)
                had = 0
                sent[request_id] = 0
            new_tokens = no_tokens
            if outputs > had:
                new_tokens = req.output_token_ids[had:]
                sent[request_id] = outputs
            facts.append(
                RequestFacts(
                    request_id,
                    state_of.get(status, _OTHER),
                    prompt,
                    computed,
                    outputs,
                    req.num_preemptions,
                    now_scheduled,
                    blocks,
                    hit,
                    req.arrival_time,
                    req.priority,
                    req.max_tokens,
                    bool(deferred) and req in deferred,
                    new_tokens,
                    intro,
                )
            )
        pool = self._pool
        return StepFacts(
            self.step,
            self.iteration,
            time.time(),
            self.started,
            self.rank,
            scheduler.max_num_scheduled_tokens,
            prefill,
            decode,
            scheduler.max_num_running_reqs,
            pool.get_num_free_blocks(),
            pool.num_gpu_blocks - 1,  # block 0 is vLLM's null block, never handed out
            scheduler.block_size,
            preempted,
            finished,
            facts,
            idle,
        )

    def close(self) -> None:
        sink, self.sink = self.sink, None
        if sink is not None:
            sink.close()


def _intro(req: Any) -> RequestIntro:
    """What a client that did not add ``req`` needs to show it (once per request)."""
    prompt = req.prompt_token_ids
    params = req.sampling_params
    if params is None:  # a pooling request: no sampling
        return RequestIntro(list(prompt or ()))
    stop = params.stop
    return RequestIntro(
        list(prompt or ()),
        float(params.temperature),
        float(params.top_p),
        int(params.top_k),
        float(params.min_p),
        params.seed,
        float(params.presence_penalty),
        float(params.frequency_penalty),
        float(params.repetition_penalty),
        [stop] if isinstance(stop, str) else list(stop or ()),
        params.logprobs,
        params.prompt_logprobs,
    )


def _open_sink(rank: int) -> FactsSink | None:
    """The in-process listener if one is registered, else a publisher if configured."""
    if _local is not None:
        return _ListenerSink(_local)
    base = os.environ.get(PUBLISH_ENV)
    if not base:
        log.warning("stepview: scheduler plug-in loaded, but %s is not set", PUBLISH_ENV)
        return None
    try:
        address = rank_address(base, rank)
        publisher = FactsPublisher(address)
    except Exception as exc:  # a taken port must not stop the server
        log.error("stepview: cannot publish on %s=%s (rank %d): %s", PUBLISH_ENV, base, rank, exc)
        return None
    log.info("stepview: scheduler plug-in publishing on %s", address)
    return publisher


# -- the scheduler class ---------------------------------------------------------------------


class StepviewScheduler(Scheduler):
    """vLLM's scheduler, unchanged, plus a record of every step for stepview.

    ``StepviewScheduler(...)`` builds an instance of the class chained over the chosen base
    (see the module docstring); the plug-in methods below run first in its MRO.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is StepviewScheduler:
            config = kwargs.get("vllm_config", args[0] if args else None)
            cls = chained_class(resolve_base(os.environ.get(BASE_ENV), config))
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        capture = CoreCapture(self)
        if capture.failure is None:
            capture.sink = _open_sink(capture.rank)
        self._stepview = capture

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        output = super().schedule(*args, **kwargs)
        self._stepview.after_schedule(self, output)
        return output

    def update_from_output(self, *args: Any, **kwargs: Any) -> Any:
        outputs = super().update_from_output(*args, **kwargs)
        self._stepview.after_finish(self)
        return outputs

    def finish_requests(self, *args: Any, **kwargs: Any) -> Any:
        aborted = super().finish_requests(*args, **kwargs)
        self._stepview.after_finish(self)
        return aborted

    def shutdown(self) -> None:
        try:
            self._stepview.close()
        finally:
            super().shutdown()


def resolve_base(qualname: str | None, vllm_config: Any) -> type[Any]:
    """The class the plug-in extends: ``qualname``'s, or the one vLLM would pick itself."""
    if not qualname:
        scheduler_config = getattr(vllm_config, "scheduler_config", None)
        if getattr(scheduler_config, "async_scheduling", False):
            from vllm.v1.core.sched.async_scheduler import AsyncScheduler

            return AsyncScheduler
        return Scheduler
    module_name, _, class_name = qualname.rpartition(".")
    try:
        base = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"stepview cannot load the scheduler class {qualname!r}: {exc}") from exc
    if not (isinstance(base, type) and issubclass(base, Scheduler)):
        raise ValueError(
            f"stepview's scheduler plug-in can only extend a subclass of vLLM's Scheduler "
            f"(vllm.v1.core.sched.scheduler.Scheduler); {qualname!r} is not one"
        )
    if issubclass(base, StepviewScheduler):
        raise ValueError(f"{qualname!r} already is stepview's scheduler plug-in: nothing to chain")
    return base


_CHAINED: dict[type[Any], type[Any]] = {}


def chained_class(base: type[Any]) -> type[Any]:
    """``StepviewScheduler`` over ``base`` (itself when ``base`` is vLLM's ``Scheduler``).

    One class per base, made once: an engine core builds one scheduler, tests several.
    """
    if base is Scheduler:
        return StepviewScheduler
    chained = _CHAINED.get(base)
    if chained is None:
        name = f"StepviewScheduler[{base.__module__}.{base.__qualname__}]"
        chained = _CHAINED[base] = type(name, (StepviewScheduler, base), {"__module__": __name__})
    return chained


def user_scheduler_base(scheduler_cls: object) -> str | None:
    """What to chain to for a user's ``--scheduler-cls`` (``None``: vLLM's own choice).

    Checked here, in the caller's process, so a wrong class fails before an engine core
    process is even started, with the same message the plug-in would give.
    """
    if scheduler_cls is None:
        return None
    if isinstance(scheduler_cls, str):
        qualname = scheduler_cls
    elif isinstance(scheduler_cls, type):
        qualname = f"{scheduler_cls.__module__}.{scheduler_cls.__qualname__}"
    else:
        raise ValueError(f"--scheduler-cls must name a class, not {scheduler_cls!r}")
    if qualname == PLUGIN_QUALNAME:
        return None
    resolve_base(qualname, None)
    return qualname


# -- the client side -------------------------------------------------------------------------


def client_id_lookup(llm_engine: Any) -> Callable[[str], str | None] | None:
    """Engine-core id -> the caller's id, via the ``LLMEngine``'s output processor.

    ``None`` (and one log line) when the output processor is not where vLLM 0.32 keeps it.
    The lookup also answers ``None`` for a request the client no longer tracks (finished or
    aborted), which is how a record captured before a request finished is read after it.
    """
    try:
        states = llm_engine.output_processor.request_states
        if not isinstance(states, dict):
            raise TypeError("output_processor.request_states is not a dict")
    except Exception as exc:
        log.warning("stepview: per-request scheduler states unavailable: %s", exc)
        return None
    get = states.get

    def lookup(internal_id: str) -> str | None:
        state = get(internal_id)
        external: str | None = None if state is None else state.external_req_id
        return external

    return lookup
