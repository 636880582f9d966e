"""Requests another client sent, as the watching side first sees them in a record.

The engine core's record names a request by the core's id and carries, once, its prompt token
ids and sampling parameters (its intro). :func:`arrival` turns that into the
:class:`~stepview.model.engine_api.ArrivedRequest` the ledger adopts
(:mod:`stepview.engine.driver.adoption` says how it then enters and leaves), under the short id
a person can read (:func:`short_id`).
"""

from __future__ import annotations

import re

from stepview.engine.records.facts import INTRO_SAMPLING_FIELDS, RequestFacts
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
    match = _RANDOM_ID.match(client_id)
    if match is None:
        return client_id
    index = match.group(2)
    return match.group(1)[:8] if index in (None, "0") else f"{match.group(1)[:8]}-{index}"


def arrival(request_id: str, req: RequestFacts, samples: int, now: float) -> ArrivedRequest:
    """An adopted request as the ledger takes it (``samples``: its samples seen so far)."""
    intro = req.intro
    prompt = f"({req.num_prompt_tokens} prompt tokens)"
    waited = max(0.0, now - req.arrival_time)
    if intro is None:
        spec = SamplingSpec(max_tokens=req.max_tokens, n=samples)
        return ArrivedRequest(request_id, prompt, spec, waited)
    sampling = {name: getattr(intro, name) for name in INTRO_SAMPLING_FIELDS}
    sampling["stop"] = tuple(intro.stop)
    sampling["top_k"] = max(0, intro.top_k)  # vLLM's -1 is the spec's 0: off
    spec = SamplingSpec(max_tokens=req.max_tokens, n=samples, **sampling)
    return ArrivedRequest(request_id, prompt, spec, waited, tuple(intro.prompt_token_ids))
