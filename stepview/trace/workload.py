"""The workload of a recorded run: what its clients sent and when, rebuilt from a trace.

"Would twice the KV cache have stopped last night's preemption storm?" needs last night's
requests again, as they came. A trace (a ``--record`` file or a flight recording, of an engine
stepview ran or of a server it watched) holds every request it saw in its final view: prompt,
sampling parameters, arrival time and output. :func:`workload_of` turns those into the
requests a rerun sends (``stepview --rerun``) and the exports write (``--export-workload``), so
the three can never disagree about what the workload was.

Per request:

* **The prompt** is what the engine was given, as far as the trace tells: a chat request's
  messages; the text, where the request was made of text; the token ids where only ids were
  seen (a synthetic load's prompts, a prompts file's ``prompt_token_ids``, and every request
  of a watched server, whose engine core sees only ids: the text a watch shows was decoded
  by the server, special tokens included, and would not encode back to the same tokens). A
  request whose prompt cannot be rebuilt (ids-only, and the ids were never recorded) is
  :class:`Skipped`, with the reason, never dropped unnamed.
* **Its sampling parameters and seed** are the recorded ones, except the output length: a
  request that did not end on its own stop (it ran into ``max_tokens``, was aborted, or was
  still running when the recording ended) gets ``ignore_eos`` and ``max_tokens`` set to the
  tokens it produced, so the rerun asks the engine for the same work whatever it samples.
  :attr:`WorkloadRequest.forced` says which had their parameters changed so. One that ended
  on its own stop keeps its parameters (its length is the model's choice: a greedy rerun makes
  it again); so does one that produced nothing (it never showed a length). ``n > 1`` samples
  share one ``max_tokens``: such a request is forced only when none of them stopped on its own.
* **Its arrival** is an offset from the workload's start: the first moment the recording shows
  the engine running, or the earliest arrival when that came sooner (a flight recording, or a
  watch, opens on requests already in flight). Offsets are what ``"at"`` in a prompts file and
  :class:`~stepview.model.commands.Arrival` mean: seconds after the engine is up.

Plain data: reads a :class:`~stepview.trace.store.Trace`, imports neither vLLM nor Textual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from stepview.model.commands import AddRequest, Arrival
from stepview.model.prompts import TOKEN_IDS_NAME, names_token_ids
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestView
from stepview.trace.store import Trace

STOPPED_ON_ITS_OWN = "stop"
"""vLLM's finish reason for a sample that ended on EOS, a stop string or a stop token."""


@dataclass(frozen=True, slots=True)
class WorkloadRequest:
    """One request of the workload: what to send, when, and what it was recorded doing."""

    at: float  # seconds after the workload's start
    request: AddRequest
    prompt_token_ids: tuple[int, ...]  # the ids the engine ran (empty: never tokenized)
    output_tokens: tuple[int, ...]  # tokens each sample produced in the recording
    forced: bool  # ``ignore_eos`` / ``max_tokens`` set to hold its recorded length

    @property
    def request_id(self) -> str:
        return self.request.request_id


@dataclass(frozen=True, slots=True)
class Skipped:
    """A request of the recording that cannot be sent again, and why."""

    request_id: str
    why: str


@dataclass(frozen=True, slots=True)
class Workload:
    """Every request of a recording, rebuilt or skipped (see the module docstring)."""

    requests: tuple[WorkloadRequest, ...]  # in order of arrival
    skipped: tuple[Skipped, ...]
    block_size: int  # the engine's KV cache block, in tokens (0: the trace does not say)
    attached: bool  # recorded by watching a server (prompts as ids)

    def arrivals(self, speed: float = 1.0) -> tuple[Arrival, ...]:
        """The requests as a :class:`~stepview.model.commands.Schedule`'s arrivals, their
        offsets divided by ``speed`` (2: twice as fast)."""
        if not speed > 0:
            raise ValueError(f"the speed must be above 0, got {speed!r}")
        return tuple(Arrival(r.at / speed, r.request) for r in self.requests)

    @property
    def forced(self) -> list[str]:
        """The ids of the requests whose recorded length is forced."""
        return [r.request_id for r in self.requests if r.forced]

    @property
    def span(self) -> float:
        """Seconds from the start to the last arrival."""
        return self.requests[-1].at if self.requests else 0.0


def workload_of(trace: Trace) -> Workload:
    """The workload of everything ``trace`` has read (see the module docstring)."""
    snapshots = trace.snapshots
    info = trace.info
    views: Sequence[RequestView] = ()
    if len(snapshots):
        last = snapshots[len(snapshots) - 1]
        views = last.requests()
        info = last.info if last.info.model or last.info.attached else info
    attached = bool(info.attached)
    origin = _start(trace, views)
    requests: list[WorkloadRequest] = []
    skipped: list[Skipped] = []
    for view in sorted(views, key=lambda v: v.timings.arrival):
        rebuilt = rebuild(view, attached=attached)
        if isinstance(rebuilt, str):
            skipped.append(Skipped(view.request_id, rebuilt))
            continue
        request, forced = rebuilt
        requests.append(
            WorkloadRequest(
                at=max(0.0, view.timings.arrival - origin),
                request=request,
                prompt_token_ids=tuple(view.prompt_token_ids),
                output_tokens=tuple(len(c.token_ids) for c in view.completions),
                forced=forced,
            )
        )
    return Workload(tuple(requests), tuple(skipped), info.block_size, attached)


def _start(trace: Trace, views: Sequence[RequestView]) -> float:
    """The workload's start on the recording's clock: when the engine was first seen running,
    or the earliest arrival if that was sooner."""
    ready = next(
        (
            row.head.clock
            for row in trace.store.rows
            if row.head.engine_state is not EngineState.STARTING
        ),
        None,
    )
    times = [v.timings.arrival for v in views]
    if ready is not None:
        times.append(ready)
    return min(times, default=0.0)


def rebuild(view: RequestView, *, attached: bool) -> tuple[AddRequest, bool] | str:
    """The request that sends ``view``'s workload again, and whether its length is forced;
    or why it cannot be rebuilt (see the module docstring for which prompt is sent)."""
    ids = tuple(view.prompt_token_ids)
    spec, forced = recorded_length(view)
    rid, lineage = view.request_id, view.lineage
    if view.messages:
        return AddRequest(rid, "", spec, lineage=lineage, messages=view.messages), forced
    only_ids = attached or names_token_ids(view.prompt, ids)
    if ids and only_ids:
        return AddRequest(rid, view.prompt, spec, ids, lineage), forced
    if attached or (not ids and TOKEN_IDS_NAME.fullmatch(view.prompt)):
        return "its prompt was seen only as token ids, and the trace does not hold them"
    if not view.prompt:
        return "the trace holds no prompt for it"
    return AddRequest(rid, view.prompt, spec, lineage=lineage), forced


def recorded_length(view: RequestView) -> tuple[SamplingSpec, bool]:
    """``view``'s sampling parameters, holding its recorded output length where it did not
    end on its own stop; and whether they had to change for that."""
    completions = view.completions
    longest = max((len(c.token_ids) for c in completions), default=0)
    if not longest or any(c.finish_reason == STOPPED_ON_ITS_OWN for c in completions):
        return view.spec, False
    spec = replace(view.spec, ignore_eos=True, max_tokens=longest)
    return spec, spec != view.spec
