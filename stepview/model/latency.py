"""One request's latency figures, each defined once: queue, TTFT, ITL, end-to-end, decode rate.

A request's latency shows in four places: its row in the panes and its detail view, the
latency panel (``t``) with the headless summary and the run comparison, the results records,
and the CSV export. Each used to work it out by its own rules, so one request could read one
speed in the Finished pane and another in the panel. Now they all call
:func:`request_latency` and only format (or round) what it returns.

The figures, from a request's :class:`~stepview.model.snapshot.Timings` (driver clock,
seconds) and its samples' tokens, with vLLM's name for each (``FinishedRequestStats`` in
``vllm/v1/metrics/stats.py``, and ``vllm bench serve``):

``queue``
    arrival to first scheduled (``queued_time``; waiting again after a preemption does not
    add to it, in vLLM either).
``ttft``
    arrival to first token (``queued_time + prefill_time``, the benchmark's TTFT).
``itl``
    the mean time between two tokens of a sample: first token to finished over the tokens
    after the first (``mean_time_per_output_token``, the benchmark's TPOT). vLLM runs each of
    n > 1 samples as a request of its own; here they share one set of timings, so the figure
    is that of the longest sample, the one still decoding at the end. ``None`` while no
    sample has a second token.
``e2e``
    arrival to finished (``e2e_latency``); ``None`` until the request ends, however it ends.
``decode_rate``
    the request's tokens per second while it decodes: the tokens after each sample's first,
    over first token to finished. vLLM has no per-request tokens/s; this is the one its
    figures imply: ``1 / itl`` for n = 1, about ``n / itl`` for n samples decoding together.

Why the decode rate, and not output tokens over scheduled to finished (the panel's "output
tok/s" before this module): that figure counts the prefill, and any wait after a preemption,
as time spent producing tokens, so a long prompt made a fast decode look slow and the panel
disagreed with the pane and with its own inter-token row. The prefill has its figure (TTFT);
the first token of each sample is left out of the rate because the prefill step made it.

A request still in flight, given the snapshot clock ``now`` (never a live clock: the same
snapshot redraws the same): its queue time counts to ``now`` while it waits, and its ITL and
decode rate are measured to ``now`` while it decodes, as the panes show them. Without
``now`` (records, CSV, percentiles) and for a request that ended first (aborted, rejected),
a figure the request never reached is ``None``.

Spans are clamped at 0. The driver stamps every time from one monotonic clock, so only a
hand-edited or foreign trace can have them out of order, and a negative latency would only
drag a percentile or an average into nonsense.
"""

from __future__ import annotations

from typing import NamedTuple

from stepview.model.snapshot import RequestView


class RequestLatency(NamedTuple):
    """One request's figures (seconds; ``decode_rate`` in tokens/s), ``None`` where it has
    none; see the module docstring for each definition."""

    request_id: str
    queue: float | None
    ttft: float | None
    itl: float | None
    e2e: float | None
    decode_rate: float | None


def _span(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else max(0.0, end - start)


def request_latency(view: RequestView, now: float | None = None) -> RequestLatency:
    """The figures of ``view``; a request in flight measured to ``now``, if given."""
    t = view.timings
    live = None if view.state.done else now
    decode = _span(t.first_token, t.finished if t.finished is not None else live)
    lengths = [len(c.token_ids) for c in view.completions]
    longest = max(lengths, default=0)
    after_first = sum(n - 1 for n in lengths if n)
    return RequestLatency(
        view.request_id,
        queue=_span(t.arrival, t.scheduled if t.scheduled is not None else live),
        ttft=_span(t.arrival, t.first_token),
        itl=None if decode is None or longest < 2 else decode / (longest - 1),
        e2e=_span(t.arrival, t.finished),
        decode_rate=None if not decode or after_first < 1 else after_first / decode,
    )
