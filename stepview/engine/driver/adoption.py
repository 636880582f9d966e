"""Requests stepview did not add: how a watched engine's requests enter and leave the ledger.

Attached to a running server (``stepview --attach``), most requests come from the server's
other clients. The engine core's records show each one from its first step on, and show it
no more once it has left; that is all stepview learns of them. Two rules keep such requests
honest in the panes, the detail view, the history and the results file:

* **Adoption.** A request first seen in a record becomes a request of the ledger, already
  in the engine (``WAITING``; the same record's scheduler entry says more), dated back by
  how long it had already waited. Its prompt text is not in the record: the prompt shows as
  ``(N prompt tokens)``, until the server decodes it (``--api``: a step's ``described``
  news, see :mod:`~stepview.engine.watch.link.detokenize`), as it does its completions' text.
* **Ending without an output.** A request that leaves the record produced no final output
  stepview could read, so it ends ``FINISHED`` with the finish reason the watched engine
  gives (``left the engine``: vLLM's real reason is not in the record), or ``ABORTED`` /
  ``REJECTED`` with why (its server was lost, the server refused it).

What a record says of a request first seen becomes an :class:`ArrivedRequest` on the watching
side (:mod:`stepview.engine.watch.link.adopting`).
"""

from __future__ import annotations

from stepview.model.engine_api import ArrivedRequest, EndedRequest
from stepview.model.snapshot import Completion, RequestState, RequestView, Timings


def adopted_view(arrived: ArrivedRequest, now: float) -> RequestView:
    """The first view of a request first seen in the engine at driver time ``now``.

    Its arrival is ``waited`` seconds before ``now``: before the driver started (a negative
    time) for a request already in flight when stepview attached.
    """
    ids = arrived.prompt_token_ids
    return RequestView(
        request_id=arrived.request_id,
        prompt=arrived.prompt,
        spec=arrived.spec,
        state=RequestState.WAITING,
        timings=Timings(arrival=now - max(0.0, arrived.waited)),
        prompt_tokens=len(ids),
        prompt_token_ids=ids,
        trace_context=arrived.trace_context,
        client_id=arrived.client_id,
    )


def ended_view(
    view: RequestView, ended: EndedRequest, now: float
) -> tuple[RequestView, str | None]:
    """``view`` ended at driver time ``now`` as ``ended`` says, and the error to finish it
    with (``None``: none).

    FINISHED puts the reason on every sample that has none yet (a request that left before
    producing a token gets one empty sample carrying it), so the panes and the results
    file say why it finished, as they do with vLLM's own finish reasons.
    """
    view = view._replace(timings=view.timings._replace(finished=now))
    if ended.state is not RequestState.FINISHED:
        return view, ended.reason
    completions = view.completions
    if completions:
        completions = tuple(
            c if c.finish_reason else c._replace(finish_reason=ended.reason) for c in completions
        )
    else:
        completions = (Completion(0, finish_reason=ended.reason),)
    return view._replace(completions=completions), None
