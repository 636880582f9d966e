"""Requests another client sent, as the watching side first sees them in a record.

The engine core's record names a request by the core's id and carries, once, its prompt token
ids and sampling parameters (its intro). :func:`arrival` turns that into the
:class:`~stepview.model.engine_api.ArrivedRequest` the ledger adopts
(:mod:`stepview.engine.driver.adoption` says how it then enters and leaves), under the short id
a person can read (:func:`short_id`), never the same for two requests (:class:`ClientNames`).
"""

from __future__ import annotations

import re

from stepview.engine.driver.recent_ids import SEEN_IDS_KEPT, RecentIds
from stepview.engine.records.facts import INTRO_SAMPLING_FIELDS, RequestFacts, split_internal_id
from stepview.model.engine_api import ArrivedRequest
from stepview.model.sampling import SamplingSpec

_RANDOM_ID = re.compile(r"^(?:[A-Za-z]+[-_])?([0-9a-f]{16,32})(?:-(\d+))?$")


def short_id(client_id: str) -> str:
    """A client id made of a random hex id, shortened to its first 8 hex digits.

    vLLM's API server names requests ``cmpl-<16 hex>-<prompt index>`` (``chatcmpl-<16
    hex>`` for chats; 32 in some versions): the panes' id column shows a few characters,
    and the prefix never tells two requests apart. ``cmpl-3f9a1c2e…-0`` becomes
    ``3f9a1c2e`` (a prompt index other than 0 stays: ``3f9a1c2e-1``), as vLLM's log lines
    can be searched by; any other id is kept whole.
    """
    return _hex_id(client_id, 8)


def long_id(client_id: str) -> str:
    """The name of a client id whose short one is taken: its random hex id whole (``cmpl-3f9a
    1c2e5b7d0a4c-0`` becomes ``3f9a1c2e5b7d0a4c``, the index kept as in :func:`short_id`)."""
    return _hex_id(client_id, None)


def _hex_id(client_id: str, digits: int | None) -> str:
    """A random client id's hex id, its first ``digits`` (all: ``None``), with its prompt
    index other than 0; any other id whole."""
    match = _RANDOM_ID.match(client_id)
    if match is None:
        return client_id
    hex_id, index = match.group(1)[:digits], match.group(2)
    return hex_id if index in (None, "0") else f"{hex_id}-{index}"


class ClientNames:
    """The names other clients' requests go by in stepview: short, and never one for two.

    The ledger knows a request by its name, and takes a name it has seen before for the same
    request (one seen again after it ended is ignored). Short ids alone collide: vLLM's ids are
    64 random bits minus uuid4's two variant bits, so 8 hex digits hold 30, and a 30-minute
    watch of 35 491 requests had two pairs share one: the second of each pair was in no pane
    and no results file, counted nowhere. So a name stays taken as long as the ledger
    remembers names (:data:`~stepview.engine.driver.recent_ids.SEEN_IDS_KEPT`), and a client id
    whose short name is taken goes by its whole hex id, then by that with ``~2``, ``~3``, ...
    (a client that sends the same ``X-Request-Id`` twice).

    Names are given at adoption (:meth:`give`) and held while the request has samples in the
    engine core (:meth:`release` when its last leaves): the samples of one request share its
    name. :meth:`name` answers before adoption with the name :meth:`give` would give.
    """

    def __init__(self, kept: int = SEEN_IDS_KEPT) -> None:
        self._held: dict[str, str] = {}  # client id -> its name, while it has samples
        self._taken = RecentIds(kept)  # the latest ``kept`` names given

    def name(self, client_id: str) -> str:
        """The name of ``client_id``: its own if held, else the first free one."""
        name = self._held.get(client_id)
        if name is not None:
            return name
        taken = self._taken
        name = short_id(client_id)
        if name not in taken:
            return name
        name = base = long_id(client_id)
        again = 2
        while name in taken:
            name = f"{base}~{again}"
            again += 1
        return name

    def give(self, client_id: str) -> str:
        """The name ``client_id`` goes by from now on (adopted; the same while held)."""
        name = self._held.get(client_id)
        if name is None:
            name = self._held[client_id] = self.name(client_id)
            self._taken.add(name)
        return name

    def release(self, client_id: str) -> None:
        """``client_id`` has no sample in the engine core any more (its name stays taken)."""
        self._held.pop(client_id, None)

    def clear(self) -> None:
        """The engine core is gone: none of its requests is held (their names stay taken)."""
        self._held.clear()


def arrival(request_id: str, req: RequestFacts, samples: int, now: float) -> ArrivedRequest:
    """An adopted request as the ledger takes it (``samples``: its samples seen so far)."""
    intro = req.intro
    prompt = f"({req.num_prompt_tokens} prompt tokens)"
    waited = max(0.0, now - req.arrival_time)
    client_id = split_internal_id(req.req_id)[0]
    if intro is None:
        spec = SamplingSpec(max_tokens=req.max_tokens, n=samples)
        return ArrivedRequest(request_id, prompt, spec, waited, client_id=client_id)
    sampling = {name: getattr(intro, name) for name in INTRO_SAMPLING_FIELDS}
    context = intro.traceparent
    sampling["stop"] = tuple(intro.stop)
    sampling["top_k"] = max(0, intro.top_k)  # vLLM's -1 is the spec's 0: off
    spec = SamplingSpec(max_tokens=req.max_tokens, n=samples, **sampling)
    return ArrivedRequest(
        request_id,
        prompt,
        spec,
        waited,
        tuple(intro.prompt_token_ids),
        trace_context=context,
        client_id=client_id,
    )
