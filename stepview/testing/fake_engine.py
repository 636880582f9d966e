"""A deterministic stand-in for vLLM's engine, for UI tests and screenshots.

It speaks the same :class:`~stepview.model.engine_api.Engine` protocol as
:class:`~stepview.engine.own.vllm_engine.VllmEngine` and produces outputs of the same shape as
vLLM's CUMULATIVE ``RequestOutput``: one output per sample that moved, all tokens so far,
``finished`` on the last one only, which (as in vLLM) carries only that sample's completion.
Its scheduler is vLLM's policy in miniature: running requests first, then waiting ones in
order while ``max_num_seqs``, the per-step token budget (chunked prefill) and the KV blocks
allow; when blocks run out the newest running request is preempted to the front of the
waiting queue and its progress reset, and (as in vLLM) no waiting request is admitted in that
step. Rejections use vLLM's own wording.

Each step it writes the record vLLM's engine core would (a
:class:`~stepview.engine.records.facts.StepFacts`, as the scheduler plug-in captures it: what
changed) and reads it with the same :class:`~stepview.engine.records.entries.EntryReader` as
a real engine: the
states, why each waiting request waits, the token budget and the KV blocks come from the same
code, so the UI tests see what a user of real vLLM sees.

Tokens are bytes of UTF-8 text and generated tokens come from a fixed word list indexed by a
hash of (request, sample, position, seed), so every run gives the same screen.
"""

from __future__ import annotations

import time
import zlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from stepview.engine.records.entries import EntryReader
from stepview.engine.records.facts import RequestFacts, StepFacts
from stepview.engine.records.request_states import CoreState
from stepview.model.chat import NO_CHAT_TEMPLATE, ChatMessage
from stepview.model.engine_api import (
    ChatPrompt,
    CompletionUpdate,
    EngineRejected,
    OutputUpdate,
    StepResult,
)
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineCounters, EngineInfo, LogprobEntry

WORDS = (
    " the",
    " engine",
    " step",
    " token",
    " batch",
    " cache",
    " prompt",
    " robot",
    " may",
    " not",
    " injure",
    " human",
    " being",
    " to",
    " be",
    " or",
    " life",
    " meaning",
    ",",
    ".",
)


@dataclass(slots=True)
class _Seq:
    """One sample (a child, for n > 1) as the fake scheduler sees it."""

    request_id: str
    index: int
    prompt_ids: list[int]
    spec: SamplingSpec
    computed: int = 0
    output: list[int] = field(default_factory=list)
    logprobs: list[tuple[LogprobEntry, ...]] | None = None
    text: str = ""
    finish_reason: str | None = None
    preemptions: int = 0

    @property
    def total_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output)


class FakeEngine:
    """A small, deterministic engine with vLLM's scheduling behaviour (see module docstring)."""

    def __init__(
        self,
        *,
        max_num_seqs: int = 4,
        max_num_batched_tokens: int = 64,
        num_kv_blocks: int = 64,
        block_size: int = 16,
        max_model_len: int = 512,
        max_logprobs: int = 20,
        model: str = "fake-engine",
        step_delay: float = 0.0,
        chat_template: bool = False,
    ) -> None:
        """``chat_template``: the model has one (:meth:`chat_prompt` then renders ``<|role|>``
        lines, deterministic and plain to read)."""
        self.step_delay = step_delay
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.num_kv_blocks = num_kv_blocks
        self.block_size = block_size
        self._info = EngineInfo(
            model=model,
            demo_model=False,
            vllm_version="fake",
            max_model_len=max_model_len,
            max_num_seqs=max_num_seqs,
            max_logprobs=max_logprobs,
            detailed_states=True,
            chat_template=chat_template,
        )
        self._waiting: deque[_Seq] = deque()
        self._running: list[_Seq] = []
        self._children: dict[str, list[_Seq]] = {}
        self._prompt_logprobs: dict[str, list[tuple[LogprobEntry, ...] | None]] = {}
        self._prefix_queries = 0
        self._step = 0
        self._view = EntryReader(self._client_id)
        self._seq = 0  # records written
        self._arrived: list[_Seq] = []  # added since the last record
        self._last_scheduled: list[_Seq] = []  # scheduled in the last record's step
        self._left: list[str] = []  # core ids of samples that left since the last record
        self.shut_down = False

    @property
    def info(self) -> EngineInfo:
        return self._info

    def add_request(
        self, request_id: str, prompt: str, spec: SamplingSpec, prompt_token_ids: Sequence[int] = ()
    ) -> None:
        errors = spec.errors(self._info.max_logprobs)
        if errors:
            raise EngineRejected(next(iter(errors.values())))
        prompt_ids = list(prompt_token_ids) if prompt_token_ids else list(prompt.encode())
        if not prompt_ids:
            raise EngineRejected("The decoder prompt cannot be empty")
        limit = self._info.max_model_len
        if len(prompt_ids) >= limit:
            raise EngineRejected(
                f"The decoder prompt (length {len(prompt_ids)}) is longer than the maximum "
                f"model length of {limit}. Make sure that `max_model_len` is no smaller than "
                "the number of text tokens."
            )
        children = [_Seq(request_id, i, prompt_ids, spec) for i in range(spec.n)]
        if spec.logprobs is not None:
            for child in children:
                child.logprobs = []
        if spec.prompt_logprobs is not None:
            self._prompt_logprobs[request_id] = [None] + [
                (LogprobEntry(t, -1.0 - (t % 7) / 10, 1 + t % 3, chr(t) if t < 128 else "?"),)
                for t in prompt_ids[1:]
            ]
        self._children[request_id] = children
        self._waiting.extend(children)
        self._arrived.extend(children)

    def chat_prompt(self, messages: Sequence[ChatMessage]) -> ChatPrompt:
        """Like vLLM's: refused without a template, else the text and its tokens (bytes)."""
        if not self._info.chat_template:
            raise EngineRejected(NO_CHAT_TEMPLATE)
        text = "".join(f"<|{m.role}|>{m.content}\n" for m in messages) + "<|assistant|>"
        return ChatPrompt(text, tuple(text.encode()))

    def abort(self, request_ids: list[str]) -> None:
        for request_id in request_ids:
            children = self._children.pop(request_id, None)
            if children is None:
                continue
            self._running = [s for s in self._running if s.request_id != request_id]
            self._waiting = deque(s for s in self._waiting if s.request_id != request_id)
            self._left.extend(_core_id(seq) for seq in children if seq.finish_reason is None)

    def has_unfinished(self) -> bool:
        return bool(self._children)

    def shutdown(self) -> None:
        self.shut_down = True

    def _client_id(self, core_id: str) -> str | None:
        """The request id of a sample's engine-core id (``"<index>_<request id>"``, as vLLM
        names the samples of a request), while the request is tracked."""
        request_id = core_id.partition("_")[2]
        return request_id if request_id in self._children else None

    # -- one step ----------------------------------------------------------------------------

    def _blocks(self, seq: _Seq, extra: int = 0) -> int:
        """KV blocks the sequence holds once ``extra`` more tokens are computed."""
        return -(-(seq.computed + extra) // self.block_size)

    def _growth(self, seq: _Seq, want: int) -> int:
        """New blocks needed to compute ``want`` more tokens of ``seq``."""
        return self._blocks(seq, want) - self._blocks(seq)

    def _free_blocks(self) -> int:
        return self.num_kv_blocks - sum(self._blocks(s) for s in self._running)

    def step(self) -> StepResult:
        if self.step_delay:
            time.sleep(self.step_delay)  # a real step takes time; UI tests want to see it
        budget = self.max_num_batched_tokens
        # (sequence, tokens computed this step, whether it was still prefilling). Tokens are
        # counted as computed when scheduled, so later checks see the blocks already taken.
        scheduled: list[tuple[_Seq, int, bool]] = []
        preempted: list[_Seq] = []  # this step, newest running first
        # Running first: decode one token, or continue a chunked prefill.
        for seq in list(self._running):
            if seq not in self._running:
                continue
            want = min(max(len(seq.prompt_ids) - seq.computed, 1), budget)
            if want <= 0:
                break
            while self._free_blocks() < self._growth(seq, want) and len(self._running) > 1:
                victim = self._running.pop()
                victim.computed = 0
                victim.preemptions += 1
                preempted.append(victim)
                self._waiting.appendleft(victim)
                scheduled = [entry for entry in scheduled if entry[0] is not victim]
                if victim is seq:
                    break
            if seq not in self._running:
                continue
            scheduled.append((seq, want, seq.computed < len(seq.prompt_ids)))
            seq.computed += want
            budget -= want
        # Then waiting requests, in order, while seats, budget and blocks allow (none in a
        # step that preempted: vLLM skips the waiting queue then).
        while (
            self._waiting
            and not preempted
            and len(self._running) < self.max_num_seqs
            and budget > 0
        ):
            seq = self._waiting[0]
            want = min(len(seq.prompt_ids) - seq.computed, budget)
            if self._free_blocks() < self._blocks(seq, want):
                break
            self._waiting.popleft()
            self._running.append(seq)
            self._prefix_queries += len(seq.prompt_ids)
            scheduled.append((seq, want, True))
            seq.computed += want
            budget -= want
        # The record is taken here, as the plug-in takes it after schedule(): requests this
        # step finishes still run and hold their blocks. It is read after the outputs, so
        # those that finished are gone from it, as with a real engine.
        self._step += 1
        facts = self._record(scheduled, budget, preempted)
        prompt_tokens = 0
        generated: list[_Seq] = []
        for seq, count, prefilling in scheduled:
            if prefilling:
                prompt_tokens += count
                if seq.computed < len(seq.prompt_ids):
                    continue
            self._generate(seq)
            generated.append(seq)
        outputs = self._outputs(generated)
        counters = EngineCounters(
            running=len(self._running),
            waiting=len(self._waiting),
            # A lone request may overrun a tiny cache (vLLM would have refused it): cap at 100 %.
            kv_cache_usage=min(1.0, 1.0 - self._free_blocks() / self.num_kv_blocks),
            prompt_tokens=prompt_tokens,
            generation_tokens=len(generated),
            prefix_cache_queries=self._prefix_queries,
            prefix_cache_hits=0,
            preemptions=len(preempted),
        )
        scheduler = self._view.read(facts)
        return StepResult(
            outputs=outputs,
            scheduled=scheduler,
            counters=counters,
            budget=self._view.budget,
            queue_reasons=(self._view.queue_reason,),
        )

    def _record(
        self, scheduled: list[tuple[_Seq, int, bool]], left: int, preempted: list[_Seq]
    ) -> StepFacts:
        """The record vLLM's engine core would give of this step (see the module docstring):
        the first lists every request, each later one those whose facts changed (arrived,
        scheduled in this step or the last, preempted), as the plug-in's do."""
        given = {id(seq): count for seq, count, _ in scheduled}
        prefill = sum(count for _, count, prefilling in scheduled if prefilling)
        running = set(map(id, self._running))

        def facts(seq: _Seq) -> RequestFacts:
            held = id(seq) in running
            if held:
                state = CoreState.RUNNING
            else:
                state = CoreState.PREEMPTED if seq.preemptions else CoreState.WAITING
            return RequestFacts(
                _core_id(seq),
                int(state),
                len(seq.prompt_ids),
                seq.computed,
                len(seq.output),
                seq.preemptions,
                given.get(id(seq), 0),
                self._blocks(seq) if held else 0,
                0,
                0.0,
                0,
                seq.spec.max_tokens,
            )

        self._seq += 1
        full = self._seq == 1
        if full:
            named: Sequence[_Seq] = (*self._running, *self._waiting)
        else:
            held = {*map(id, self._running), *map(id, self._waiting)}
            changed = {
                id(seq): seq
                for seq in (*self._arrived, *(s for s, _, _ in scheduled), *self._last_scheduled)
            }
            changed.update((id(seq), seq) for seq in preempted)
            named = [seq for key, seq in changed.items() if key in held]
        self._arrived = []
        self._last_scheduled = [seq for seq, _, _ in scheduled]
        return StepFacts(
            self._step,
            self._step,
            time.time(),
            0.0,
            0,
            self._seq,
            full,
            self.max_num_batched_tokens,
            prefill,
            self.max_num_batched_tokens - left - prefill,
            self.max_num_seqs,
            len(self._running),
            len(self._waiting),
            max(0, self._free_blocks()),
            self.num_kv_blocks,
            self.block_size,
            [_core_id(seq) for seq in preempted],
            self._take_left(),
            [facts(seq) for seq in named],
            waiting_head=_core_id(self._waiting[0]) if self._waiting else None,
        )

    def _take_left(self) -> list[str]:
        left, self._left = self._left, []
        return left

    def _generate(self, seq: _Seq) -> None:
        position = len(seq.output)
        key = f"{seq.request_id}/{seq.index}/{position}/{seq.spec.seed}"
        word = zlib.crc32(key.encode()) % len(WORDS)
        if seq.spec.greedy:
            word = (len(seq.prompt_ids) + position) % len(WORDS)
        seq.output.append(word)
        seq.text += WORDS[word]
        if seq.logprobs is not None:
            entry = LogprobEntry(word, -0.25 - word / 40, 1, WORDS[word])
            seq.logprobs.append((entry,))
        if any(stop and stop in seq.text for stop in seq.spec.stop):
            seq.finish_reason = "stop"
        elif len(seq.output) >= seq.spec.max_tokens or seq.total_tokens >= self._info.max_model_len:
            seq.finish_reason = "length"
        if seq.finish_reason is not None:
            self._running.remove(seq)
            self._left.append(_core_id(seq))

    def _outputs(self, generated: list[_Seq]) -> tuple[OutputUpdate, ...]:
        outputs = []
        last_of_request = {seq.request_id: i for i, seq in enumerate(generated)}
        for i, seq in enumerate(generated):
            children = self._children[seq.request_id]
            finished = last_of_request[seq.request_id] == i and all(
                c.finish_reason is not None for c in children
            )
            prompt_logprobs = self._prompt_logprobs.pop(seq.request_id, None)
            outputs.append(
                OutputUpdate(
                    request_id=seq.request_id,
                    prompt_token_ids=seq.prompt_ids,
                    prompt_logprobs=prompt_logprobs,
                    completions=(
                        CompletionUpdate(
                            index=seq.index,
                            text=seq.text,
                            token_ids=seq.output,
                            cumulative_logprob=(
                                sum(e[0].logprob for e in seq.logprobs) if seq.logprobs else None
                            ),
                            logprobs=seq.logprobs,
                            finish_reason=seq.finish_reason,
                            stop_reason=None,
                        ),
                    ),
                    finished=finished,
                )
            )
        for seq in generated:
            remaining = self._children.get(seq.request_id)
            if remaining and all(c.finish_reason is not None for c in remaining):
                del self._children[seq.request_id]
        return tuple(outputs)


def _core_id(seq: _Seq) -> str:
    return f"{seq.index}_{seq.request_id}"


class ManualClock:
    """A clock that moves only when told (or by ``tick`` on every read), for repeatable timings."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now = 0.0
        self.tick = tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
