"""The two things stepview's own engine reads of vLLM from the client side, and how.

They run in stepview's process, not in the engine core, but they read vLLM's private objects
(``LLMEngine.output_processor``, the core client's utility calls), so they live in the one room
that knows vLLM's internals: when vLLM moves them, this is the file to change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

log = logging.getLogger("stepview.engine.plugin")


def client_id_lookup(llm_engine: Any) -> Callable[[str], str | None] | None:
    """Engine-core id -> the caller's id, via the ``LLMEngine``'s output processor (``None``,
    and one log line, when it is not where vLLM 0.32 keeps it). The lookup answers ``None`` for
    a request the client no longer tracks: a record captured before it finished, read after."""
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
        return None if state is None else cast("str | None", state.external_req_id)

    return lookup


class ProcessCoreHold:
    """vLLM's own pause for a core in its own process (``CoreHold``): the engine core's utility
    calls ``pause_scheduler("keep")`` (schedule nothing, keep requests and their KV blocks) and
    ``resume_scheduler``, as vLLM's ``/pause`` endpoint uses them. An answer comes on the step
    outputs' socket, after them: once it is in, the client's output queue holds exactly the
    steps the driver has not read yet.

    The same calls from vLLM 0.32 to 0.34 (0.34 adds ``reset_connector``, after the two given
    here). 0.34's ``resume_scheduler`` refuses while a process checkpoint is prepared or failed
    (``--checkpoint-prepare-on-startup``, the checkpoint endpoints): stepview's engine never
    prepares one, and it holds a core only while the core serves, so the checkpoint state is
    RUNNING whenever it resumes; a refusal would end the run with vLLM's reason, as any engine
    failure does."""

    def __init__(self, client: Any) -> None:
        self._call, self._outputs = client.call_utility, client.outputs_queue

    def hold(self) -> int:
        self._call("pause_scheduler", "keep", False)
        return int(self._outputs.qsize())

    def release(self) -> None:
        self._call("resume_scheduler")

    def step_once(self) -> int:
        # The pause arrives during the step the resume let start (ms against a fraction of
        # one), so the core makes one step; the driver reads whatever it made.
        self.release()
        return self.hold()


def process_core_hold(llm_engine: Any) -> ProcessCoreHold | None:
    """The hold for a core in its own process; ``None`` in-process (not stepping is enough)."""
    client = getattr(llm_engine, "engine_core", None)
    if callable(getattr(client, "call_utility", None)) and hasattr(client, "outputs_queue"):
        return ProcessCoreHold(client)
    return None
