"""A request's intro, as the plug-in sends it once to a client that did not add the request.

The prompt token ids and the sampling parameters the engine core holds for one sample
(:class:`~stepview.engine.records.facts.RequestIntro`), read from vLLM's request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from stepview.engine.records.facts import INTRO_SAMPLING_FIELDS, RequestIntro

TRACEPARENT = "traceparent"  # the W3C header vLLM keeps in Request.trace_headers


def _listed(stop: Any) -> list[str]:
    """``stop`` as a list: vLLM makes it one in ``__post_init__``, but a str or None is legal."""
    return [stop] if isinstance(stop, str) else list(stop or ())


def _as_is(value: Any) -> Any:
    return value


# Each sampling field of the intro, read from vLLM's SamplingParams under the same name and
# made the type the record declares: vLLM keeps ``temperature=0`` as the int 0, which would go
# out as a msgpack int and reach an in-process reader as one. Built once, from the struct.
_TO_WIRE: dict[Any, Callable[[Any], Any]] = {float: float, int: int, bool: bool, list[str]: _listed}
_SAMPLING = tuple(
    (field.name, _TO_WIRE.get(field.type, _as_is))
    for field in msgspec.structs.fields(RequestIntro)
    if field.name in INTRO_SAMPLING_FIELDS
)


def intro_of(req: Any) -> RequestIntro:
    """What a client that did not add ``req`` needs to show it (once per request)."""
    prompt = list(req.prompt_token_ids or ())
    params = req.sampling_params
    headers = getattr(req, "trace_headers", None)  # vLLM 0.32-0.34; None without a context
    context = str(headers.get(TRACEPARENT) or "") if headers else ""
    if params is None:  # a pooling request: no sampling
        return RequestIntro(prompt, traceparent=context)
    # By name, not position: right whatever else the intro holds one day (~2 us a request).
    sampling = {name: wire(getattr(params, name)) for name, wire in _SAMPLING}
    return RequestIntro(prompt, **sampling, traceparent=context)
