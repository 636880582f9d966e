"""Setting up stepview's scheduler plug-in: where its records go, which class it extends.

Kept apart from :mod:`stepview.engine.plugin.scheduler` (the one module that reads vLLM's
internals) because none of this does: the in-process listener and the publisher the plug-in
hands its records to, and the choice of the vLLM scheduler class it is built over.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from stepview.engine.plugin.publisher import FactsPublisher
from stepview.engine.records.channel import (
    PUBLISH_ENV,
    PUBLISH_EVERY_ENV,
    PUBLISH_EVERY_S,
    PUBLISH_REMOTE_ENV,
    FactsSink,
)
from stepview.engine.records.curve import (
    CLIENT_KEYS_ENV,
    SERVER_SECRET_ENV,
    CurveKeyError,
    server_keys,
)
from stepview.engine.records.facts import StepFacts
from stepview.model.address import ZmqEndpoint, zmq_endpoint

log = logging.getLogger("stepview.engine.plugin")

PLUGIN_QUALNAME = "stepview.engine.scheduler_plugin.StepviewScheduler"


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


class ListenerSink:
    """The in-process listener as a sink: always wanted, records handed over as they are."""

    __slots__ = ("binding", "deliver")

    def __init__(self, binding: LocalBinding) -> None:
        binding.bound = True
        self.binding = binding
        self.deliver = binding.callback

    fresh = False  # the listener gets every record: nothing to resend
    tails = False  # stepview's own engine reads vLLM's outputs

    def wanted(self) -> bool:
        return True

    def close(self) -> None:
        pass


def open_sink(rank: int) -> FactsSink | None:
    """The in-process listener if one is registered, else a publisher if configured."""
    if _local is not None:
        return ListenerSink(_local)
    given = os.environ.get(PUBLISH_ENV)
    if not given:
        log.warning("stepview: scheduler plug-in loaded, but %s is not set", PUBLISH_ENV)
        return None
    try:
        base = zmq_endpoint(given)
    except ValueError as exc:
        log.error("stepview: cannot publish on %s=%s (rank %d): %s", PUBLISH_ENV, given, rank, exc)
        return None
    try:
        keys = server_keys() if base.tcp else None
    except CurveKeyError as exc:
        log.error("stepview: not publishing on %s=%s: %s", PUBLISH_ENV, given, exc)
        return None
    refusal = (
        None if keys is not None else remote_refusal(base, os.environ.get(PUBLISH_REMOTE_ENV, ""))
    )
    if refusal is not None:
        log.error("stepview: %s", refusal)
        return None
    if keys is not None:
        log.info(
            "stepview: publishing with CURVE, to the watches whose keys are in %s", keys.clients
        )
    elif not base.loopback:
        log.warning(
            "stepview: %s=%s with %s=1: every request's prompt and completion token ids and "
            "sampling parameters go to anyone who can reach that address, unencrypted",
            PUBLISH_ENV,
            given,
            PUBLISH_REMOTE_ENV,
        )
    try:
        address = base.for_rank(rank).text
        publisher = FactsPublisher(address, publish_every(), keys)
    except Exception as exc:  # a taken port must not stop the server
        log.error("stepview: cannot publish on %s=%s (rank %d): %s", PUBLISH_ENV, given, rank, exc)
        return None
    log.info("stepview: scheduler plug-in publishing on %s", address)
    return publisher


def remote_refusal(address: ZmqEndpoint, allowed: str) -> str | None:
    """Why the plug-in will not publish on ``address`` (``None``: it may).

    The records carry every request's token ids, so they are as private as the prompts: a bind
    other machines can reach needs the server's owner to say so (``allowed`` is
    ``STEPVIEW_PUBLISH_REMOTE``'s value, ``1`` to allow).
    """
    if address.loopback or allowed.strip() == "1":
        return None
    return (
        f"not publishing on {PUBLISH_ENV}={address}: other machines could read every "
        f"request's prompt and completion token ids there. Publish on tcp://127.0.0.1:PORT and "
        f"watch through an ssh tunnel (ssh -L PORT:127.0.0.1:PORT), or set "
        f"{PUBLISH_REMOTE_ENV}=1 to publish there anyway, or give CURVE keys "
        f"({SERVER_SECRET_ENV}, {CLIENT_KEYS_ENV}); the server runs on without stepview"
    )


def publish_every() -> float:
    """Seconds of records sent together (``STEPVIEW_PUBLISH_EVERY_MS``; a bad value: default)."""
    raw = os.environ.get(PUBLISH_EVERY_ENV, "").strip()
    if not raw:
        return PUBLISH_EVERY_S
    try:
        return max(0.0, float(raw) / 1000)
    except ValueError:
        log.warning(
            "stepview: %s=%r is not a number of ms; using the default", PUBLISH_EVERY_ENV, raw
        )
        return PUBLISH_EVERY_S


# -- the class the plug-in extends ------------------------------------------------------------


def resolve_base(qualname: str | None, vllm_config: Any) -> type[Any]:
    """The class the plug-in extends: ``qualname``'s, or the one vLLM would pick itself."""
    from vllm.v1.core.sched.scheduler import Scheduler

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
    if getattr(base, "STEPVIEW_PLUGIN", False):
        raise ValueError(f"{qualname!r} already is stepview's scheduler plug-in: nothing to chain")
    return base


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


# -- the class the plug-in is built over -------------------------------------------------------

_CHAINED: dict[tuple[type[Any], type[Any]], type[Any]] = {}


def chain_over(plugin: type[Any], base: type[Any]) -> type[Any]:
    """``plugin`` placed in front of ``base`` in a class of both (its methods run first).

    One class per base, made once: an engine core builds one scheduler, tests several. It
    lives in ``plugin``'s module, so it pickles and prints as the plug-in's.
    """
    chained = _CHAINED.get((plugin, base))
    if chained is None:
        name = f"{plugin.__name__}[{base.__module__}.{base.__qualname__}]"
        namespace = {"__module__": plugin.__module__}
        chained = _CHAINED[(plugin, base)] = type(name, (plugin, base), namespace)
    return chained
