"""How stepview's own engine gets the scheduler plug-in's records, in either engine-core mode.

:class:`~stepview.engine.own.vllm_engine.VllmEngine` always builds vLLM's engine with
``scheduler_cls`` set to the plug-in; what differs is where the engine core runs:

* **in-process** (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): :class:`LocalLink` registers a
  listener while the engine is built; the scheduler, built in this process, calls it with
  every record (no encoding, no copy).
* **multiprocess** (vLLM's default): :class:`SubscribedLink` picks a private ``ipc://``
  address, puts it in ``STEPVIEW_PUBLISH`` before vLLM spawns the engine core process (which
  inherits the environment) and subscribes to it.

Records are matched to steps, not just read newest first: with the core in its own process
(and with async scheduling in any mode) the core schedules ahead of the outputs
``LLMEngine.step()`` returns. Each step's outputs carry the core's iteration count (vLLM's
iteration details, which stepview turns on), and so does each record
(:attr:`~stepview.engine.records.facts.StepFacts.iteration`): :meth:`take` returns the record of
that iteration and every one before it (records say what changed: none may be skipped), so
stepview shows the scheduler as it was for the outputs it shows, the same step by step in
both modes. Without an iteration (a step that scheduled nothing) it returns every record
received. Records the channel dropped leave a gap in their sequence: the link then waits for
the full record it asks the plug-in for (:class:`~stepview.engine.records.stream.RecordStream`).
:attr:`available` says whether records can come at all.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import tempfile
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from stepview.engine.records.catch_up import END_LOG_ENV
from stepview.engine.records.channel import (
    BASE_ENV,
    FULL_PART_ENV,
    PUBLISH_ENV,
    PUBLISH_EVERY_ENV,
    FactsSubscriber,
)
from stepview.engine.records.facts import StepFacts
from stepview.engine.records.stream import RecordStream

if TYPE_CHECKING:
    from stepview.engine.plugin.config import LocalBinding

log = logging.getLogger(__name__)

MULTIPROCESSING_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"
# After vLLM reports the engine ready, its core has long bound the publisher: the handshake
# takes milliseconds. Generous for a loaded 2-core machine.
CONNECT_TIMEOUT_S = 10.0
# A record is sent a whole model step before the outputs of its step: when the outputs are
# there first anyway, wait this long for it before falling back to the newest record.
LATE_RECORD_WAIT_S = 0.02
# Records kept for steps whose outputs the client has not read yet (it lags the core): past
# this many the client is lost anyway; it drops them and starts again from a full record.
MAX_PENDING = 4096


def multiprocess_from_environment() -> bool:
    """vLLM's own reading of ``VLLM_ENABLE_V1_MULTIPROCESSING`` (default on)."""
    return os.environ.get(MULTIPROCESSING_ENV, "1").strip().lower() not in ("0", "false")


@contextlib.contextmanager
def _environment(values: dict[str, str | None]) -> Iterator[None]:
    """Set (``None``: unset) environment variables for the block, then restore them.

    vLLM caches its environment variables once an engine core has started in this process
    (``vllm.envs.enable_envs_cache``); the cache is dropped so the new values are read.
    """
    saved = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    with contextlib.suppress(ImportError, AttributeError):
        import vllm.envs

        vllm.envs.disable_envs_cache()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class PendingRecords:
    """Records received and not yet matched to a step, oldest first."""

    def __init__(self) -> None:
        self._records: deque[StepFacts] = deque()

    def add(self, facts: StepFacts) -> None:
        self._records.append(facts)

    def extend(self, records: list[StepFacts]) -> None:
        self._records.extend(records)

    def __len__(self) -> int:
        return len(self._records)

    def behind(self, iteration: int) -> bool:
        """True when no record of ``iteration`` or later has arrived yet."""
        return not self._records or self._records[-1].iteration < iteration

    def take(self, iteration: int | None) -> list[StepFacts]:
        """Every record up to the one of ``iteration`` (``None``: all of them), oldest first.

        Each record says what changed since the one before, so none may be skipped: a step's
        reader applies them all. Records of later iterations (a core that schedules ahead of
        the outputs read) stay for the next step.
        """
        records = self._records
        if iteration is None:
            taken = list(records)
            records.clear()
            return taken
        taken = []
        while records and records[0].iteration <= iteration:
            taken.append(records.popleft())
        return taken


class CoreLink(Protocol):
    """The source of records for one engine."""

    @property
    def available(self) -> bool: ...

    def building(self, base: str | None) -> contextlib.AbstractContextManager[None]:
        """Wrap the engine's construction: the environment the plug-in reads, the listener."""

    def started(self) -> None:
        """The engine is built: wait until records can flow (multiprocess: the handshake)."""

    def take(self, iteration: int | None) -> list[StepFacts]:
        """The records up to the step with this iteration count (``None``: all pending)."""

    def close(self) -> None: ...


class LocalLink:
    """Records from a scheduler in this process, through the plug-in's in-process listener."""

    def __init__(self) -> None:
        self._pending = PendingRecords()
        self._binding: LocalBinding | None = None

    @property
    def available(self) -> bool:
        binding = self._binding
        return binding is not None and binding.bound and binding.failure is None

    @contextlib.contextmanager
    def building(self, base: str | None) -> Iterator[None]:
        from stepview.engine.plugin.config import local_listener

        env = {MULTIPROCESSING_ENV: "0", PUBLISH_ENV: None, BASE_ENV: base}
        with _environment(env), local_listener(self._receive) as binding:
            self._binding = binding
            yield

    def started(self) -> None:
        failure = self._binding.failure if self._binding is not None else None
        if failure is not None:
            log.warning("stepview: the scheduler plug-in switched itself off: %s", failure)
        elif not self.available:
            log.warning("stepview: the scheduler plug-in did not start in this process")

    def _receive(self, facts: StepFacts) -> None:
        self._pending.add(facts)

    def take(self, iteration: int | None) -> list[StepFacts]:
        return self._pending.take(iteration)

    def close(self) -> None:
        self._pending = PendingRecords()


class SubscribedLink:
    """Records from an engine core process, over a private ipc address."""

    def __init__(self, address: str | None = None) -> None:
        self._socket_file: Path | None = None
        if address is None:
            name = f"stepview-{os.getpid()}-{secrets.token_hex(4)}.sock"
            self._socket_file = Path(tempfile.gettempdir()) / name
            address = f"ipc://{self._socket_file}"
        self.address = address
        # Connected first: zmq connects once the core binds, long before the first request.
        self._subscriber = FactsSubscriber(address)
        self._pending = PendingRecords()
        self._stream = RecordStream(self._subscriber.resync)
        self._off: str | None = None  # why the plug-in switched itself off, once it said so

    @property
    def available(self) -> bool:
        """Connected, and the plug-in has not said it is off: after that word no record
        comes, and the engine's steps carry no scheduler entries (not empty ones, which
        would say that nothing changed)."""
        return self._subscriber.connects > 0 and self._off is None

    @property
    def subscriber(self) -> FactsSubscriber:
        return self._subscriber

    def building(self, base: str | None) -> contextlib.AbstractContextManager[None]:
        # Every record at once, a full one whole: the driver reads each step's with that
        # step's outputs. No log of ends: stepview's own engine has every request's end from
        # vLLM's outputs.
        env = {
            MULTIPROCESSING_ENV: "1",
            PUBLISH_ENV: self.address,
            BASE_ENV: base,
            PUBLISH_EVERY_ENV: "0",
            FULL_PART_ENV: "0",
            END_LOG_ENV: "0",
        }
        return _environment(env)

    def started(self) -> None:
        if not self._subscriber.wait_connected(CONNECT_TIMEOUT_S):
            log.warning(
                "stepview: no connection from the engine core's plug-in on %s within %.0f s",
                self.address,
                CONNECT_TIMEOUT_S,
            )

    def take(self, iteration: int | None) -> list[StepFacts]:
        pending = self._pending
        self._receive(self._subscriber.poll())
        if iteration is not None and pending.behind(iteration):
            self._receive(self._subscriber.poll(LATE_RECORD_WAIT_S))
        return pending.take(iteration)

    def _receive(self, records: list[StepFacts]) -> None:
        """Keep the records that can be read in order (see :class:`RecordStream`)."""
        take = self._stream.take
        for facts in records:
            if facts.plugin_off is not None:  # no step: the plug-in is off (its log says why)
                log.warning("stepview: the scheduler plug-in is off: %s", facts.plugin_off)
                self._off = facts.plugin_off
                return
        self._pending.extend([facts for facts in map(take, records) if facts is not None])
        if len(self._pending) > MAX_PENDING:
            self._pending = PendingRecords()
            self._stream.reset()
            self._subscriber.resync()

    def close(self) -> None:
        self._subscriber.close()
        if self._socket_file is not None:
            # zmq removes it when the publisher closes, but vLLM ends a core process
            # without always getting that far (and a crashed one never does).
            self._socket_file.unlink(missing_ok=True)


def open_link(multiprocess: bool) -> LocalLink | SubscribedLink:
    """The link for an engine whose core runs in this process or in its own."""
    return SubscribedLink() if multiprocess else LocalLink()
