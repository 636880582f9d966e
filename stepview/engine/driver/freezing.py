"""A request's new frozen view after a step: its state and dates, from what the step told.

Kept apart from :mod:`stepview.engine.driver.ledger`, which decides *which* requests a step
touched, enter, finish or leave: this is how one touched request is pictured again, the
part with the most rules (the scheduler's entry, when the engine gives one, says the state,
the wait reason and the KV blocks; without one, output means decoding; vLLM's own stamps,
when present, date scheduling and the first token at the step's start rather than its end).
It runs for every request that moved in every step, so it reads the track's per-step marks
once and builds the view positionally.
"""

from __future__ import annotations

from stepview.engine.driver.tracks import Track
from stepview.model.engine_api import SchedulerEntry
from stepview.model.snapshot import RequestState, RequestView, Timings


def shows_news(entry: SchedulerEntry, view: RequestView) -> bool:
    """The scheduler's new ``entry`` for a request changes something its ``view`` shows (a
    new entry object saying the same is common: it is then not frozen again)."""
    return not (
        entry.state is view.state
        and entry.computed_prompt_tokens == view.computed_prompt_tokens
        and entry.num_preemptions == view.num_preemptions
        and entry.scheduled_tokens == view.scheduled_tokens
        and entry.kv_blocks == view.kv_blocks
        and entry.cached_prompt_tokens == view.cached_prompt_tokens
        and entry.queue == view.queue
        and entry.wait_reason == view.wait_reason
    )


def freeze(track: Track, now: float, scheduler_known: bool) -> RequestView:
    """The track's new frozen view after a step, and the per-step marks cleared.

    State comes from the scheduler's entry when the engine has one; without a scheduler
    view, a request that produced output is decoding.
    """
    view = track.view
    timings = view.timings
    state = view.state
    prompt_token_ids = view.prompt_token_ids
    prompt_tokens = view.prompt_tokens
    computed = view.computed_prompt_tokens
    preemptions = view.num_preemptions
    completions = view.completions
    reason, scheduled, blocks = view.wait_reason, view.scheduled_tokens, view.kv_blocks
    cached = view.cached_prompt_tokens
    queue = view.queue
    if track.moved:
        if track.prompt_token_ids is not None:
            prompt_token_ids = track.prompt_token_ids
            prompt_tokens = len(prompt_token_ids)
        if track.got_tokens and timings.first_token is None:
            stamp = track.stamp
            if stamp is None:
                timings = Timings(timings.arrival, timings.scheduled, now, timings.finished)
            else:  # vLLM's own times: scheduled at its step's start, not at its end
                scheduled_at = max(timings.arrival, now - stamp.scheduled_ago)
                first_at = max(scheduled_at, now - stamp.first_token_ago)
                timings = Timings(timings.arrival, scheduled_at, first_at, timings.finished)
        samples = track.completions
        if len(samples) == 1:  # n=1, the common case: no sort
            only = next(iter(samples.values())).view
            completions = () if only is None else (only,)
        else:
            completions = tuple(
                [ct.view for _, ct in sorted(samples.items()) if ct.view is not None]
            )
    entry = track.new_entry
    if entry is not None:
        state = entry.state
        if timings.scheduled is None and state.pane == "running":
            timings = Timings(timings.arrival, now, timings.first_token, timings.finished)
        prompt_tokens = entry.prompt_tokens
        computed = entry.computed_prompt_tokens
        preemptions = entry.num_preemptions
        reason, scheduled, blocks = entry.wait_reason, entry.scheduled_tokens, entry.kv_blocks
        cached = entry.cached_prompt_tokens
        queue = entry.queue
    elif track.moved and not scheduler_known and state is not RequestState.DECODING:
        state = RequestState.DECODING
        if timings.scheduled is None:
            timings = Timings(
                timings.arrival, timings.first_token, timings.first_token, timings.finished
            )
        computed = prompt_tokens
    prompt_logprobs = view.prompt_logprobs
    if track.prompt_logprobs is not None:
        prompt_logprobs = track.prompt_logprobs
    track.moved = track.got_tokens = False
    track.new_entry = track.stamp = None
    track.prompt_token_ids = track.prompt_logprobs = None
    return RequestView(
        view.request_id,
        view.prompt,
        view.spec,
        state,
        timings,
        prompt_tokens,
        computed,
        preemptions,
        prompt_token_ids,
        prompt_logprobs,
        completions,
        view.error,
        reason,
        scheduled,
        blocks,
        max(blocks, view.peak_kv_blocks),
        cached,
        lineage=view.lineage,
        queue=queue,
        messages=view.messages,
        trace_context=view.trace_context,
        client_id=view.client_id,
    )
