"""The plug-in's bounded log of what ended, for watches that lost records: :class:`EndLog`.

A watch too slow for the records loses some, and with them the requests that came and went
inside them (:mod:`stepview.engine.records.catch_up`). The plug-in keeps every end, as a
watch that never saw the request needs it, in its wire form, and answers a watch that asks
for those after the last record it read.

Runs inside vLLM's engine core: per step it costs what ended in it (one encode per ending,
a deque append), never what the core holds; asking costs only the watch that asked (one
message, sent once). Memory is bounded by both a count and bytes (``STEPVIEW_END_LOG``,
``STEPVIEW_END_LOG_MB``); what falls out is remembered by id (up to :data:`FALLEN_IDS` times
the count bound), so a watch can still count what it will never see. Logging starts with the first
subscriber and stops :data:`~stepview.engine.records.catch_up.END_LOG_LINGER_S` after the last
one left (the publisher says which: :attr:`EndLog.open`); then the log is emptied, and its
answers say that ends from before may be missing (:attr:`known_after`).
"""

from __future__ import annotations

import logging
import os
import sys
from collections import deque
from typing import Any

from stepview.engine.plugin.intro import intro_of
from stepview.engine.records.catch_up import (
    END_LOG_ENDS,
    END_LOG_ENV,
    END_LOG_MB,
    END_LOG_MB_ENV,
    LoggedEnd,
    encode_answer,
    encode_logged,
)
from stepview.engine.records.facts import EndedFacts, RequestFacts
from stepview.engine.records.request_states import CoreState

log = logging.getLogger("stepview.engine.plugin")

# The ids of what fell out, kept to count what a watch will never see: this many times the
# count bound (a watch far behind misses much more than the log holds, but only so much).
FALLEN_IDS = 5
_UNKNOWN = 1 << 62  # known_after while paused, until the first end logged since says from when
_ENDED = int(CoreState.OTHER)  # the state a logged request is given: it is no longer held


def ended_request(
    req: Any, ended: EndedFacts, cached: int = 0, times: tuple[float, float] = (0.0, 0.0)
) -> RequestFacts:
    """vLLM's request ``req``, which ended as ``ended``, as the first record naming it would
    have carried it, for a watch that never saw it: its intro, prompt length, arrival,
    ``max_tokens``, ``cached`` (its prefix-cache hit) and ``times`` (vLLM's scheduled and
    first-token times, 0.0 where unseen); no token tail (every output token is in ``ended``)."""
    lora = req.lora_request
    return RequestFacts(
        req.request_id,
        _ENDED,
        req.num_prompt_tokens,
        req.num_computed_tokens,
        ended.num_output_tokens,
        req.num_preemptions,
        0,
        0,
        cached,
        req.arrival_time,
        req.priority,
        req.max_tokens,
        False,
        [],
        intro_of(req),
        lora.lora_int_id if lora is not None else 0,
        times[0],
        times[1],
    )


class EndLog:
    """What ended, oldest first, within ``max_ends`` entries and ``max_bytes`` encoded bytes.

    Only ever used from the engine core's scheduling thread (the capture adds, the publisher
    answers, both there).
    """

    def __init__(self, max_ends: int = END_LOG_ENDS, max_bytes: int = END_LOG_MB << 20) -> None:
        self.max_ends = max(1, max_ends)
        self.max_bytes = max_bytes
        self._entries: deque[tuple[int, str, bytes]] = deque()  # (tag, core id, wire form)
        # (tag, core id) of what fell out: ~180 bytes each, held only once that much fell out
        self._fallen: deque[tuple[int, str]] = deque(maxlen=FALLEN_IDS * self.max_ends)
        self.bytes = 0  # encoded bytes held
        self.dropped = 0  # entries that fell out, since the start
        self.known_after = 0  # ends tagged at or before it may be in neither list of an answer
        self.upto = 0  # the newest tag logged
        self.core_started = 0.0
        self.open = False  # logging: someone listens, or did within the linger (the publisher)

    @classmethod
    def from_env(cls) -> EndLog | None:
        """The log as ``STEPVIEW_END_LOG`` / ``STEPVIEW_END_LOG_MB`` size it (``None``: off)."""
        ends, megabytes = END_LOG_ENDS, END_LOG_MB
        try:
            ends = int(os.environ.get(END_LOG_ENV, "").strip() or ends)
            megabytes = int(os.environ.get(END_LOG_MB_ENV, "").strip() or megabytes)
        except ValueError:
            log.warning("stepview: %s and %s take whole numbers; using the defaults",
                        END_LOG_ENV, END_LOG_MB_ENV)  # fmt: skip
            ends, megabytes = END_LOG_ENDS, END_LOG_MB
        if ends <= 0 or megabytes <= 0:
            return None
        return cls(ends, megabytes << 20)

    def __len__(self) -> int:
        return len(self._entries)

    def footprint(self) -> int:
        """The bytes the log holds in Python objects, its entries' and the fallen ids'
        (O(entries): for benchmarks and tests, never per step)."""
        size = sys.getsizeof
        held = size(self._entries) + size(self._fallen)
        held += sum(size(e) + size(e[0]) + size(e[1]) + size(e[2]) for e in self._entries)
        return held + sum(size(f) + size(f[0]) + size(f[1]) for f in self._fallen)

    def add(
        self,
        tag: int,
        req: Any,
        ended: EndedFacts,
        core_started: float,
        ended_at: float,
        cached: int = 0,
        times: tuple[float, float] = (0.0, 0.0),
    ) -> None:
        """Log vLLM's request ``req``, which ended as ``ended`` (at ``ended_at``, server wall
        clock), under ``tag``; ``cached``: its prefix-cache hit; ``times``: vLLM's scheduled
        and first-token times (wall clock; 0.0 where the plug-in did not see them)."""
        if self.known_after == _UNKNOWN:  # the first since a pause: older ones may be missing
            self.known_after = tag
        self.core_started = core_started
        request = ended_request(req, ended, cached, times)
        data = encode_logged(LoggedEnd(tag, request, ended, ended_at))
        entries = self._entries
        entries.append((tag, ended.req_id, data))
        self.bytes += len(data)
        self.upto = tag
        while len(entries) > self.max_ends or (self.bytes > self.max_bytes and len(entries) > 1):
            old_tag, core_id, old = entries.popleft()
            self.bytes -= len(old)
            self.dropped += 1
            fallen = self._fallen
            if len(fallen) == fallen.maxlen:  # even its id goes: say so from then on
                self.known_after = max(self.known_after, fallen[0][0])
            fallen.append((old_tag, core_id))

    def answer(self, after: int) -> bytes:
        """The wire form of the answer to "what ended after record ``after``?" (the ends
        and ids are the newest: found from the end, O(what the answer holds))."""
        ends: list[bytes] = []
        for tag, _, data in reversed(self._entries):
            if tag <= after:
                break
            ends.append(data)
        ends.reverse()
        missing: list[str] = []
        tags: list[int] = []
        for tag, core_id in reversed(self._fallen):
            if tag <= after:
                break
            missing.append(core_id)
            tags.append(tag)
        missing.reverse()
        tags.reverse()
        return encode_answer(
            self.core_started, after, self.upto, self.known_after, ends, missing, tags
        )

    def pause(self) -> None:
        """Logging stops (nobody listened for the linger): empty, and from now on say that
        ends up to the next one logged may be missing."""
        self._entries.clear()
        self._fallen.clear()
        self.bytes = 0
        self.known_after = _UNKNOWN
        self.open = False
