"""Start-up progress from vLLM's own log lines: the phases the loading view names.

Loading a model takes seconds to minutes and vLLM reports no progress through its API, but it
logs a line as each phase begins. :class:`PhaseHandler`, installed on vLLM's logger only while
the engine is built, turns those lines into ``on_phase`` calls ("loading weights", "allocating
KV cache", ...), which the driver publishes for the loading view.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("stepview.engine.own.vllm_engine")


# Start-up log messages of vLLM 0.32-0.34 (substrings of the unformatted message) -> the phase that
# begins when they appear. Unknown messages change nothing, so a later vLLM that rewords them
# only makes the phase coarser.
_PHASE_MESSAGES: tuple[tuple[str, str], ...] = (
    ("Resolved architecture", "reading model config"),
    ("Initializing a V1 LLM engine", "starting engine core"),
    ("Starting to load model", "loading weights"),
    ("Loading model from scratch", "loading weights"),  # 0.34's model runners (V2, CPU)
    ("Loading weights took", "allocating KV cache"),
    ("Memory profiling takes", "allocating KV cache"),
    ("init engine (profile, create kv cache, warmup model) took", "starting output processing"),
)


class PhaseHandler(logging.Handler):
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
