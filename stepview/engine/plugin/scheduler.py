"""stepview's scheduler plug-in for vLLM's engine core: the one module that reads vLLM internals.

vLLM's public API says what a request *produced*; whether it is queued, how far its chunked
prefill has got, or that it was preempted lives only in the V1 scheduler, inside the engine
core: in the caller's process with ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, in its own otherwise
(vLLM's default, and ``vllm serve``). vLLM builds its scheduler there from the class named by
``--scheduler-cls``, so stepview ships one: :class:`StepviewScheduler`.

After every ``schedule()`` it builds a :class:`~stepview.engine.records.facts.StepFacts` with every
request the scheduler holds and hands it to one sink: an **in-process listener** registered
with :func:`~stepview.engine.plugin.config.local_listener` (a plain call, no encoding), or a
**publisher** when ``STEPVIEW_PUBLISH`` names a zmq address
(:mod:`stepview.engine.records.channel`; each data-parallel rank on
:meth:`~stepview.model.address.ZmqEndpoint.for_rank` of it). Nothing is built while
nobody is subscribed: a server with the plug-in and no stepview attached pays a clock read.

When the scheduler empties it sends one more, ``idle`` record (an idle core stops scheduling,
and subscribers must still learn who left). For a client that did not add the requests
(``stepview --attach``) records also carry output tokens not sent yet, once each request's
prompt ids and sampling (``intro``), and how requests ended (vLLM frees a request in the
update that finishes it, so while someone listens the request map is copied before it).

A thread of the plug-in writes the core's thread stacks when a step hangs, and when stepview
or a watch asks (:mod:`~.stacks`): nothing of it runs per step.

The plug-in never raises into vLLM: a capture that fails, or a vLLM whose scheduler lacks what
it reads (:mod:`~.vllm_versions`), logs once, naming the vLLM version, and switches it off for
the rest of the run; whoever listens is told why. It is built over the class vLLM would have
picked (``AsyncScheduler`` with async scheduling, else ``Scheduler``: from vLLM 0.33 on the
update logic is ``Scheduler``'s and ``AsyncScheduler`` only adds to it, so the hooks below see
the same calls either way) or over ``STEPVIEW_SCHEDULER_BASE`` (a user's own;
:mod:`~.plugin_setup` sets all this up without reading internals). The client side lives here
too: :func:`client_id_lookup` and :class:`ProcessCoreHold` (pausing a core in its own process).
"""

from __future__ import annotations

import os
from typing import Any

from vllm.v1.core.sched.scheduler import Scheduler

from stepview.engine.plugin.capture import CoreCapture
from stepview.engine.plugin.config import ListenerSink, chain_over, open_sink, resolve_base
from stepview.engine.plugin.stacks import watch_stacks
from stepview.engine.plugin.vllm_versions import announce_off
from stepview.engine.records.channel import BASE_ENV

# -- the scheduler class ---------------------------------------------------------------------


class StepviewScheduler(Scheduler):
    """vLLM's scheduler, unchanged, plus a record of every step; an instance is of the class
    chained over the chosen base (the plug-in's methods run first in its MRO)."""

    STEPVIEW_PLUGIN = True  # how resolve_base tells the plug-in from a base to chain

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is StepviewScheduler:
            config = kwargs.get("vllm_config", args[0] if args else None)
            cls = chained_class(resolve_base(os.environ.get(BASE_ENV), config))
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stepview = capture = connected(CoreCapture(self))
        sink = capture.sink
        self._stepview_stacks = (
            None
            if capture.failure is not None
            else watch_stacks(self, capture, sink, isinstance(sink, ListenerSink))
        )

    # Each hook holds the capture's (re-entrant) lock: while the core is idle, the stack watch
    # answers watches from its own thread (CoreCapture.while_idle), and the scheduler must not
    # change under it. Uncontended while the core works: the watch takes it only when idle.

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        throttle = kwargs.get("throttle_prefills", args[0] if args else False)
        capture = self._stepview
        with capture.lock:
            capture.before_schedule(self, bool(throttle))
            output = super().schedule(*args, **kwargs)
            capture.after_schedule(self, output)
        return output

    def add_request(self, request: Any) -> None:
        capture = self._stepview
        with capture.lock:
            super().add_request(request)
            capture.arrived(request.request_id)

    def update_from_output(self, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        capture = self._stepview
        with capture.lock:
            before = capture.before_update(self, scheduler_output)
            outputs = super().update_from_output(scheduler_output, *args, **kwargs)
            capture.after_update(self, before, scheduler_output, outputs)
        return outputs

    def finish_requests(self, *args: Any, **kwargs: Any) -> Any:
        capture = self._stepview
        with capture.lock:
            aborted = super().finish_requests(*args, **kwargs)
            capture.after_abort(self, aborted)
        return aborted

    def shutdown(self) -> None:
        try:
            if self._stepview_stacks is not None:
                self._stepview_stacks.close()
            self._stepview.close()
        finally:
            super().shutdown()


def connected(capture: CoreCapture) -> CoreCapture:
    """``capture`` with its sink; when it is already off (a vLLM it cannot read), the sink is
    opened all the same, to tell whoever listens why."""
    sink = open_sink(capture.rank)
    if capture.failure is None:
        capture.sink = sink
    else:
        announce_off(sink, capture.failure, capture.started, capture.rank)
    return capture


def chained_class(base: type[Any]) -> type[Any]:
    """``StepviewScheduler`` over ``base``: itself for vLLM's ``Scheduler`` (see chain_over)."""
    return StepviewScheduler if base is Scheduler else chain_over(StepviewScheduler, base)
