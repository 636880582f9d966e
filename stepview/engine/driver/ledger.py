"""The driver's per-request bookkeeping: what stepview knows of every request, step by step.

The :class:`RequestLedger` holds each request from the moment its ``AddRequest`` is dequeued
until it reaches a final state: the pending queue, the mutable per-request tracks the
engine's outputs are folded into, and the append-only list of finished requests. It knows
nothing of threads, queues or publishing (that is :class:`~stepview.engine.driver.loop.Driver`):
a test hands it commands and :class:`StepResult` values one at a time and reads its views.

How a request's state is derived, each step:

* ``PENDING`` from :meth:`RequestLedger.accept` until :meth:`RequestLedger.admit` hands it to
  the engine;
* ``WAITING`` / ``PREEMPTED`` / ``PREFILLING`` / ``DECODING`` from the scheduler's view when the
  engine provides one; otherwise ``DECODING`` once it produced a token, else ``WAITING``;
* ``FINISHED`` from the engine's ``finished`` output (for n > 1, when all samples are done),
  ``ABORTED`` on an abort (or when the engine failed under it), ``REJECTED`` when the engine
  refused it; ``UNFINISHED`` when the run ended first (:meth:`RequestLedger.end_in_flight`).

The scheduler's part of that, and every date a step gives a request, are worked out as its
new view is frozen (:mod:`stepview.engine.driver.freezing`). A watched engine
(``stepview --attach``) also reports requests stepview did not add and requests that ended
without an output; :mod:`stepview.engine.driver.adoption` says how those enter and leave.

Work per step is what the step changed: a request that made no progress keeps the same
:class:`RequestView` object, and token lists grow in place behind frozen views.
"""

from __future__ import annotations

import logging
import traceback
from collections import deque
from collections.abc import Callable, Sequence

from stepview.engine.driver.adoption import adopted_view, ended_view
from stepview.engine.driver.chat_prompts import prompt_of
from stepview.engine.driver.freezing import freeze, shows_news
from stepview.engine.driver.recent_ids import RecentIds
from stepview.engine.driver.tracks import Track, fold_output, take_described_text
from stepview.model.active import ActiveBuilder, ActiveViews
from stepview.model.commands import AddRequest
from stepview.model.engine_api import (
    ArrivedRequest,
    DescribedRequest,
    EndedRequest,
    Engine,
    EngineRejected,
    StepResult,
)
from stepview.model.errors import describe
from stepview.model.grow import packed
from stepview.model.recent import KEEP_FINISHED, Finished, FinishedLog
from stepview.model.scheduling import NOT_ADMITTED, REASON_OF, WaitReason
from stepview.model.snapshot import (
    RequestState,
    RequestView,
    Timings,
)

log = logging.getLogger(__name__)

# The error of a request the run left unfinished.
UNFINISHED_WHY = "stepview stopped before the request finished"
# ... of a watched server's: it goes on there.
UNWATCHED_WHY = "stepview stopped watching before the request finished (the server goes on)"
_NOT_ADMITTED = WaitReason(NOT_ADMITTED, REASON_OF[NOT_ADMITTED].sentence)


class RequestLedger:
    """Every request the driver was given, from accepted to finished; no thread of its own.

    ``now`` is the driver's clock (seconds since the driver started): arrival, scheduling,
    first-token and finishing times are read from it.
    """

    def __init__(self, now: Callable[[], float], keep_finished: int = KEEP_FINISHED) -> None:
        """``keep_finished``: finished requests kept in memory (the latest; all of them go to
        the sinks, the results file, as they finish)."""
        self._now = now
        self._tracks: dict[str, Track] = {}  # not finished yet, in arrival order
        self._active = ActiveBuilder()  # their views, for the snapshots (the same order)
        self._pending: deque[str] = deque()  # accepted, not yet handed to the engine
        self._finished: FinishedLog[RequestView] = FinishedLog(keep_finished)
        self._finished_since_take: list[RequestView] = []
        # Ids given out: a second request under one would be indistinguishable from the
        # first to the engine (the latest SEEN_IDS_KEPT, so memory stays bounded).
        self._seen_ids = RecentIds()

    # -- views -------------------------------------------------------------------------------

    def active(self) -> ActiveViews:
        """Every request not finished yet (pending, waiting, running), in arrival order."""
        return self._active.freeze()

    def finished(self) -> Finished[RequestView]:
        """The latest finished requests, in order of finishing (a frozen window, not a copy;
        its ``total`` counts every one)."""
        return self._finished.view()

    @property
    def finished_count(self) -> int:
        return len(self._finished)

    @property
    def has_pending(self) -> bool:
        """Requests are waiting to be handed to the engine."""
        return bool(self._pending)

    def take_finished(self) -> list[RequestView]:
        """The requests that reached a final state since the last call (for the sinks)."""
        finished, self._finished_since_take = self._finished_since_take, []
        return finished

    # -- requests in, requests out -------------------------------------------------------------

    def accept(
        self, command: AddRequest, refusal: str | None = None, engine: Engine | None = None
    ) -> None:
        """Queue a new request as pending, or reject it at once.

        ``refusal`` says why no engine can take requests (it failed, or is not running); a
        request id seen before is rejected too, since the engine could not tell the two apart.
        A chat request is templated by ``engine`` here (:mod:`.chat_prompts`), or rejected.
        """
        prompt = prompt_of(command, None if refusal else engine)
        view = RequestView(
            request_id=command.request_id,
            prompt=prompt.text,
            spec=command.spec,
            state=RequestState.PENDING,
            timings=Timings(arrival=self._now()),
            wait_reason=_NOT_ADMITTED,
            prompt_tokens=len(prompt.token_ids),
            prompt_token_ids=prompt.token_ids,
            lineage=command.lineage,
            messages=command.messages,
        )
        refusal = refusal or prompt.refusal
        if command.request_id in self._seen_ids:
            message = f"duplicate request id {command.request_id!r}"
            self._finish(view, RequestState.REJECTED, message)
            return
        self._seen_ids.add(command.request_id)
        if refusal is not None:
            self._finish(view, RequestState.REJECTED, refusal)
            return
        self._add(Track(view))
        self._pending.append(command.request_id)

    def admit(self, engine: Engine, limit: int = 0) -> bool:
        """Hand pending requests to ``engine`` (all, or ``limit`` of them); True if any were.

        A request the engine refuses ends as rejected with its message; one whose
        ``add_request`` raised anything else too, so a faulty engine cannot take the others
        down with it.
        """
        count = len(self._pending)
        if limit:
            count = min(count, limit)
        for _ in range(count):
            request_id = self._pending.popleft()
            track = self._tracks[request_id]
            view = track.view
            try:
                if view.prompt_token_ids:  # given as ids (a synthetic load's prompt)
                    engine.add_request(request_id, view.prompt, view.spec, view.prompt_token_ids)
                else:
                    engine.add_request(request_id, view.prompt, view.spec)
            except EngineRejected as exc:
                message = str(exc)
            except Exception as exc:
                log.warning("add_request(%s) raised\n%s", request_id, traceback.format_exc())
                message = describe(exc)
            else:
                track.in_engine = True
                self._show(track, view._replace(state=RequestState.WAITING, wait_reason=None))
                continue
            self._drop(request_id)
            self._finish(view, RequestState.REJECTED, message)
        return count > 0

    def abort(self, request_id: str, engine: Engine | None) -> bool:
        """End ``request_id`` as aborted by the user; True when ``engine`` held it (and was told).

        A request that is finished, rejected or unknown is left alone; so is one the engine
        cannot abort (a watched server's request from another client), whose view then
        says why in its error.
        """
        track = self._tracks.get(request_id)
        if track is None:
            return False
        if track.in_engine and engine is not None:
            try:
                engine.abort([request_id])
            except EngineRejected as exc:
                self._show(track, track.view._replace(error=str(exc)))
                return False
            told = True
        else:
            self._pending.remove(request_id)
            told = False
        self._drop(request_id)
        self._finish(track.view, RequestState.ABORTED, "aborted by the user")
        return told

    def end_in_flight(self, why: str, state: RequestState = RequestState.ABORTED) -> int:
        """The engine is gone: every request it held, or was to get, ends in ``state``.

        ``ABORTED`` when the engine failed under them, ``UNFINISHED`` when the run ended
        first. They can never finish now; ending them puts them in the Finished pane and the
        results file with the reason and the tokens they had, instead of leaving them running
        forever on screen or losing them. Returns how many there were.
        """
        count = len(self._tracks)
        for track in self._tracks.values():
            self._finish(track.view, state, why)
        self._tracks.clear()
        self._active.clear()
        self._pending.clear()
        return count

    # -- applying a step ---------------------------------------------------------------------

    def apply(self, result: StepResult, now: float) -> None:
        """Fold a step's outputs and scheduler view into the tracks; one new view per change.

        ``now`` is when the step ended (driver clock): first tokens, scheduling and finishing
        seen in ``result`` are dated to it. Work is proportional to what the step changed:
        outputs (one per sample that moved) and scheduler entries that are new objects (the
        probe reuses unchanged ones, so an identity test skips every request that is just
        waiting or decoding along).
        """
        tracks = self._tracks
        if result.arrived:
            self._adopt(result.arrived, now)
        touched: dict[str, Track] = {}
        # A dict, not a list: records folded into one step (a watch catching up after a
        # resync) may say twice that a request finished; it finishes once.
        finished_ids: dict[str, None] = {}
        for update in result.outputs:
            track = tracks.get(update.request_id)
            if track is None:
                continue  # aborted this step
            if fold_output(track, update):
                finished_ids[update.request_id] = None
            touched[update.request_id] = track
        for request_id, stamp in result.stamps.items():
            stamped = touched.get(request_id)
            if stamped is not None:
                stamped.stamp = stamp
        scheduled = result.scheduled
        if scheduled is not None:
            for request_id, entry in scheduled.items():
                track = tracks.get(request_id)
                if track is None or entry is track.entry or not track.in_engine:
                    continue
                track.entry = entry
                if not shows_news(entry, track.view):
                    continue
                track.new_entry = entry
                touched[request_id] = track
        if result.described:
            self._describe(result.described, touched)
        for track in touched.values():
            self._show(track, freeze(track, now, scheduled is not None))
        for request_id in finished_ids:
            view = self._drop(request_id).view
            timings = view.timings
            if timings.scheduled is None:
                # Scheduled and finished within this one step (e.g. max_tokens=1): it has
                # already left the scheduler, so no entry ever showed it running.
                timings = timings._replace(scheduled=now)
            state_view = view._replace(
                timings=timings._replace(finished=now),
                computed_prompt_tokens=max(view.computed_prompt_tokens, view.prompt_tokens),
            )
            self._finish(state_view, RequestState.FINISHED, None)
        if result.ended:
            self._end(result.ended, now)

    def _adopt(self, arrived: Sequence[ArrivedRequest], now: float) -> None:
        """Requests a watched engine holds that stepview did not add: in the engine already."""
        for request in arrived:
            track = self._tracks.get(request.request_id)
            if track is not None:  # more of its samples arrived: n grew
                self._show(track, track.view._replace(spec=request.spec))
                continue
            if request.request_id in self._seen_ids:
                continue  # seen before (it ended)
            self._seen_ids.add(request.request_id)
            self._add(Track(adopted_view(request, now), in_engine=True))

    def _describe(self, described: Sequence[DescribedRequest], touched: dict[str, Track]) -> None:
        """Text a watched engine's server decoded for requests it adopted: the prompt in place
        of ``(N prompt tokens)``, the completions of samples that finish in this step."""
        for news in described:
            track = self._tracks.get(news.request_id)
            if track is None or not track.in_engine:
                continue
            if news.prompt is not None:
                self._show(track, track.view._replace(prompt=news.prompt))
            for index, text in news.completions:
                if take_described_text(track, index, text):
                    touched[news.request_id] = track

    def _end(self, ended: Sequence[EndedRequest], now: float) -> None:
        """Requests that ended without a final output (:mod:`~stepview.engine.driver.adoption`)."""
        for end in ended:
            track = self._tracks.get(end.request_id)
            if track is None or not track.in_engine:
                continue
            self._drop(end.request_id)
            view, error = ended_view(track.view, end, now)
            self._finish(view, end.state, error)

    def _add(self, track: Track) -> None:
        """A new request, last in arrival order."""
        self._tracks[track.view.request_id] = track
        self._active.append(track.view)

    def _show(self, track: Track, view: RequestView) -> None:
        """The request's view from now on (what the next snapshot shows)."""
        self._active.set(track.view, view)
        track.view = view

    def _drop(self, request_id: str) -> Track:
        """The request is no longer active; its track, for the final view."""
        track = self._tracks.pop(request_id)
        self._active.remove(track.view)
        return track

    def _finish(self, view: RequestView, state: RequestState, error: str | None) -> None:
        timings = view.timings
        if timings.finished is None:
            timings = timings._replace(finished=self._now())
        final = view._replace(state=state, error=error, timings=timings)
        self._finished.append(kept(final))
        self._finished_since_take.append(final)


def kept(view: RequestView) -> RequestView:
    """A finished request as the window of finished ones keeps it: token ids packed
    (:class:`~stepview.model.grow.Packed`, a ninth of the memory). The sinks get the view
    as it was (a trace writes only the tokens its last record did not have)."""
    return view._replace(
        prompt_token_ids=packed(view.prompt_token_ids),
        completions=tuple(c._replace(token_ids=packed(c.token_ids)) for c in view.completions),
    )
