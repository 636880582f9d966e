"""The ledger's mutable per-request tracks, and how one engine output is folded into them.

Kept apart from :mod:`stepview.engine.driver.ledger` (which decides which requests a step
touched) and :mod:`~stepview.engine.driver.freezing` (which freezes their views) so each stays
a size one can read: this is the part that copies what is new in vLLM's growing, cumulative
outputs, O(new tokens) per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stepview.model.engine_api import OutputUpdate, SchedulerEntry, VllmStamps
from stepview.model.grow import Growing
from stepview.model.snapshot import Completion, PositionLogprobs, RequestView


@dataclass(slots=True)
class CompletionTrack:
    """Mutable, driver-only state of one sample; frozen into a :class:`Completion` per step."""

    index: int
    tokens: Growing[int] = field(default_factory=Growing)
    logprobs: Growing[PositionLogprobs] | None = None
    text: Growing[str] = field(default_factory=Growing)
    text_len: int = 0
    last_piece: str = ""
    view: Completion | None = None

    def take_text(self, text: str) -> None:
        """Keep vLLM's cumulative ``text`` as the piece this step appended.

        vLLM's text only grows (stop strings are held back until decided), so normally the new
        text is the old one plus a suffix; that is checked on the last piece only, O(piece).
        Anything else starts the pieces afresh.
        """
        have = self.text_len
        if len(text) == have and (not have or text.endswith(self.last_piece)):
            return
        last = self.last_piece
        if len(text) > have and text[have - len(last) : have] == last:
            piece = text[have:]
        else:
            self.text = Growing()
            piece = text
        self.text.append(piece)
        self.text_len = len(text)
        self.last_piece = piece


@dataclass(slots=True)
class Track:
    """Mutable, driver-only state of one request; ``view`` is its latest frozen picture.

    A step first folds every output and the scheduler's entry into the fields below, then
    freezes the request into one new ``view`` (an ``n=2`` request that moved on both samples
    and changed state is still frozen once).
    """

    view: RequestView
    completions: dict[int, CompletionTrack] = field(default_factory=dict)
    in_engine: bool = False
    entry: SchedulerEntry | None = None  # the last scheduler entry seen (reused while unchanged)
    # Set while folding one step's result, cleared when the view is rebuilt:
    moved: bool = False  # an output arrived
    got_tokens: bool = False  # ... with new tokens
    new_entry: SchedulerEntry | None = None  # the scheduler's view changed
    prompt_token_ids: tuple[int, ...] | None = None  # first seen this step
    prompt_logprobs: tuple[PositionLogprobs | None, ...] | None = None  # first seen this step
    stamp: VllmStamps | None = None  # vLLM's scheduled / first-token times, with the first token


def fold_output(track: Track, update: OutputUpdate) -> bool:
    """Copy what is new in one output into the track; True when the request is finished.

    Token ids and logprobs are vLLM's live, growing lists: only the positions past what the
    track already holds are copied (O(new tokens) per step, not O(length)).
    """
    track.moved = True
    if update.prompt_token_ids and not track.view.prompt_token_ids:
        track.prompt_token_ids = tuple(update.prompt_token_ids)
    if update.prompt_logprobs is not None and track.view.prompt_logprobs is None:
        track.prompt_logprobs = tuple(update.prompt_logprobs)
    completions = track.completions
    for update_c in update.completions:
        ct = completions.get(update_c.index)
        if ct is None:
            ct = completions[update_c.index] = CompletionTrack(update_c.index)
        tokens = ct.tokens
        have = len(tokens)
        if len(update_c.token_ids) > have:
            tokens.extend(update_c.token_ids[have:])
            track.got_tokens = True
        logprobs = ct.logprobs
        new_logprobs = update_c.logprobs
        if new_logprobs is not None:
            if logprobs is None:
                logprobs = ct.logprobs = Growing()
            have = len(logprobs)
            if len(new_logprobs) > have:
                logprobs.extend(new_logprobs[have:])
        ct.take_text(update_c.text)
        # Positional (here and in freezing.freeze): with keywords the call costs twice as much, and
        # this runs for every sample of every running request, every step.
        ct.view = Completion(
            update_c.index,
            ct.text.view(),
            tokens.view(),
            update_c.cumulative_logprob,
            logprobs.view() if logprobs is not None else None,
            update_c.finish_reason,
            update_c.stop_reason,
        )
    return update.finished


def take_described_text(track: Track, index: int, text: str) -> bool:
    """A sample's whole text, learnt after its tokens (a watched server decoded them).

    Only a sample the track holds takes it (one with no token has no text to show); True
    when it did, and the track is then to be frozen again.
    """
    ct = track.completions.get(index)
    if ct is None or ct.view is None:
        return False
    ct.take_text(text)
    ct.view = ct.view._replace(pieces=ct.text.view())
    track.moved = True
    return True
