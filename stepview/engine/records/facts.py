"""What vLLM's engine core knows about its requests, as records of what changed in each step.

The stepview scheduler plug-in (:mod:`stepview.engine.plugin.scheduler`) builds a
:class:`StepFacts` inside the engine core after each ``schedule()``; stepview reads it either
straight from memory (engine core in stepview's own process) or decoded from the wire
(engine core in its own process, or a running ``vllm serve``). This module is plain data with
no vLLM import, so a client that only attaches to a server needs msgspec and nothing else.

**Records of change.** A server in trouble holds thousands of waiting requests, and a record
of all of them every step would cost the engine core most exactly then. So a record carries
only the requests whose facts changed since the publisher's previous record (those that
arrived, were scheduled in this step or the one before, were preempted, deferred or blocked)
and the queue in one field: where vLLM's scan of the waiting queue stopped
(:attr:`StepFacts.waiting_head`), everyone after it waiting behind it. A request that only
waits is in no record. A subscriber keeps the latest facts of every request it was told of
and applies each record on top; the first record it uses is a **full** one (every request the
core holds), sent whenever someone (re)subscribes, and ``seq`` counts records so that one
lost on the way (a slow subscriber's queue overflowed) is noticed and a full one asked for.

Each message holds one or more consecutive records (a msgpack array of them): a server's plug-in
sends a few steps at a time, so that the cost of waking zmq's I/O thread, most of what
publishing costs, is paid once per batch, not per step.

Wire format: msgpack through msgspec, every struct ``array_like`` (a list of field values, no
field names: small and cheap to build, encode and decode). Fields are therefore positional,
and the format evolves by **appending** fields, each with a default: msgspec fills a missing
trailing field with its default and ignores extra trailing ones, so an older subscriber reads
a newer plug-in's records and vice versa. Never reorder, remove or retype a field; a change
that cannot be made by appending bumps :data:`FACTS_TOPIC` (version 2: records of change;
version 1 sent every request every step). Request states travel as plain ints (the codes of
:class:`~stepview.engine.records.request_states.CoreState`, beside the table of vLLM's states)
for the same reason: a state a newer plug-in adds must not make an older decoder reject the
whole record.

Ids are the engine core's own (``"<client id>-<8 hex>"``; ``"<i>_<client id>-<8 hex>"`` for
sample ``i`` of an ``n > 1`` request): the core never learns the client's id, so mapping back
is the client's job (see :func:`split_internal_id` for when the client is not vLLM's own).
"""

from __future__ import annotations

import re

import msgspec

# What every published message starts with; subscribers subscribe to it (zmq prefix match).
# The trailing version changes only for a change appending fields cannot express.
FACTS_TOPIC = b"stepview.facts.2"


class RequestIntro(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A request's prompt token ids and sampling parameters, as its engine core holds them.

    Sent once per request (see :attr:`RequestFacts.intro`), so that a client that did not add
    the request (``stepview --attach``) can still show what it is. Sampling parameters are
    those of one sample: the engine core holds the samples of an ``n > 1`` request as
    separate requests, each with ``n = 1``.

    The sampling fields are :class:`~stepview.model.sampling.SamplingSpec`'s, under the names
    vLLM's ``SamplingParams`` and the spec share, less the two the core does not hold per
    sample: ``max_tokens`` (in every :class:`RequestFacts`, the scheduler needs it) and ``n``
    (the client counts the samples). They are restated here, not derived from the spec,
    because the spec's order is free and this one is the wire's; both sides copy them by name
    (:data:`INTRO_SAMPLING_FIELDS`), and tests/engine/records/test_sampling_fields.py fails
    when the two lists drift apart. ``top_k`` is as vLLM holds it: -1 means off, like 0.
    """

    prompt_token_ids: list[int]
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    stop: list[str] = []
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    ignore_eos: bool = False
    # The W3C ``traceparent`` its client sent (vLLM's ``Request.trace_headers``; a server
    # keeps it only when it exports traces itself), "" for none: stepview's spans of the
    # request join the client's trace (--otlp-traces-endpoint).
    traceparent: str = ""
    # Append new fields here, each with a default.


# RequestIntro's sampling fields in wire order: every field after the prompt, up to the
# first field of another kind (the trace context).
INTRO_SAMPLING_FIELDS: tuple[str, ...] = RequestIntro.__struct_fields__[
    1 : RequestIntro.__struct_fields__.index("traceparent")
]


class RequestFacts(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One request the scheduler holds (waiting, deferred, running or preempted), after schedule.

    ``num_computed_tokens`` already counts this step's scheduled tokens, and counts generated
    tokens too (prefill progress is ``min(computed, prompt)``); a preemption resets it to 0.
    ``num_cached_tokens`` is the prompt tokens served from the prefix cache when the request
    was first scheduled (0 until then, and for requests whose first schedule this plug-in did
    not see because nobody was subscribed). ``deferred``: the scheduling scan skipped it
    (vLLM's ``deferred_waiting``), e.g. because it is blocked on something.
    """

    req_id: str
    state: int  # a CoreState value (request_states); an int on the wire (see the docstring)
    num_prompt_tokens: int
    num_computed_tokens: int
    num_output_tokens: int
    num_preemptions: int
    num_scheduled_tokens: int  # this step
    num_kv_blocks: int  # KV cache blocks the request holds (summed over cache groups)
    num_cached_tokens: int
    arrival_time: float  # wall clock (time.time()) when the client sent it
    priority: int
    max_tokens: int
    deferred: bool = False
    # Output token ids this publisher had not sent yet: the *tail* of the request's output,
    # so they start at position ``num_output_tokens - len(new_token_ids)``. After a
    # (re)subscription the next record carries every request's output from the start.
    new_token_ids: list[int] = []
    # What never changes over the request's life, sent with the first record that carries
    # the request (after a (re)subscription too), ``None`` in every later one.
    intro: RequestIntro | None = None
    # The LoRA adapter it uses (vLLM's lora_int_id; 0 for none): vLLM defers a waiting
    # request whose adapter would exceed ``StepFacts.max_loras`` in this step.
    lora_id: int = 0
    # vLLM's own times for the request, on this record's clock (``time``, the server's wall
    # clock), 0.0 when not in this record (see :attr:`StepFacts.time`): when the engine core
    # first scheduled it (its first ``SCHEDULED`` event, what vLLM's ``queued_time`` ends
    # and ``prefill_time`` starts at), in every record that names it from then until its
    # first output (vLLM holds the event until it hands it over with that output); and when
    # its first token was made (the time of the engine-core outputs that carried it, where
    # vLLM's ``prefill_time`` ends and ``decode_time`` starts), once, in the first record
    # after. Sent only to clients that do not read vLLM's outputs (``stepview --attach``).
    scheduled_at: float = 0.0
    first_token_at: float = 0.0
    # vLLM's name of its status when this plug-in's table does not know it (``state`` is then
    # CoreState.OTHER): said to whoever watches, never dropped. Empty otherwise.
    unknown_status: str = ""
    # Append new fields here, each with a default.


class EndedFacts(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A request (one sample) that finished since the previous record, as it ended.

    A request leaves the scheduler in the step that finishes it, so no later record shows
    it: this carries what the client would otherwise never see, the output tokens of its
    last step(s) and vLLM's finish reason (``stop``, ``length``, ``abort``, ``error``,
    ``repetition``; ``abort`` also when its client stopped it on a stop string). All its
    output token ids come along, once: a client that lost records on the way (it fell
    behind) still ends up with every one.
    """

    req_id: str
    num_output_tokens: int
    output_token_ids: list[int]
    finish_reason: str
    stop_reason: str | int | None = None
    # When its first token was made (as RequestFacts.first_token_at), for a request that
    # ended before a record could name it with it (its first token was also its last).
    first_token_at: float = 0.0
    # Append new fields here, each with a default.


class StepFacts(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One engine-core step: the budget, how it was spent, the KV cache, what changed.

    ``step`` counts ``schedule()`` calls in this engine core since it started (it starts over
    when the core restarts; ``core_started`` tells two cores on one address apart). Records
    are only built while someone listens, so a subscriber may see gaps in ``step``; ``seq``
    counts the records this core built, so a gap in ``seq`` between two records a subscriber
    received means it lost some (and must wait for a ``full`` one).
    ``iteration`` counts the steps that scheduled any token, as vLLM's iteration details do
    (``SchedulerStats.iteration_details.iteration_index`` is ``iteration - 1``): that is how
    a client matches a step's outputs with the record of the same step.
    ``idle`` marks the record sent when the scheduler has just emptied (after the last
    requests finished or were aborted): an idle engine core does not schedule, so without it
    a subscriber would never learn that those requests left. While the core stays idle the
    plug-in sends it again now and then (the same ``seq``: read once), and it is the first
    record of a subscriber that comes to an idle core.

    ``requests`` holds the facts of every request that changed since the previous record, or,
    when ``full``, of every request the core holds. ``finished`` are the ids that left the
    scheduler since the previous record (finished, aborted), ``ended`` says how; ``preempted``
    those preempted in this step. ``num_running`` and ``num_waiting`` are the queues' sizes.
    """

    step: int
    iteration: int
    time: float  # wall clock at capture (vLLM's own times in the record are on this clock)
    core_started: float  # wall clock when this engine core's scheduler was built
    dp_rank: int
    seq: int  # records this core built, counted from 1
    full: bool  # requests lists every request the core holds
    token_budget: int  # max_num_scheduled_tokens
    prefill_tokens: int  # tokens scheduled this step for prompts (and recomputation)
    decode_tokens: int  # tokens scheduled this step for generation
    max_num_running_reqs: int
    num_running: int  # running slots taken (running requests and paused streaming sessions)
    num_waiting: int  # waiting and preempted requests (vLLM's count, deferred ones included)
    kv_free_blocks: int
    kv_total_blocks: int  # usable blocks (vLLM's null block left out)
    block_size: int
    preempted: list[str]
    finished: list[str]
    requests: list[RequestFacts]
    idle: bool = False
    # How the requests in ``finished`` ended (those the plug-in saw end while someone
    # listened): their last tokens and finish reasons.
    ended: list[EndedFacts] = []
    # What the waiting-reason rules (stepview.engine.records.waiting_reasons) need beyond the
    # above: the request vLLM's scan of the waiting queue stopped at (the first in its scan
    # order that is neither set aside nor blocked; everyone after it waits behind it), so
    # "behind whom" is vLLM's own answer; and the scheduler settings that decide whether a
    # request that is next in line can be scheduled at all.
    waiting_head: str | None = None
    chunked_prefill: bool = True  # enable_chunked_prefill: a prompt may be split over steps
    long_prefill_threshold: int = 0  # long_prefill_token_threshold (0: no cap per step)
    max_loras: int = 0  # LoRA adapters one step may use (0: LoRA off)
    priority_policy: bool = False  # scheduling policy "priority" (else first come, first served)
    # The vLLM version the engine core runs: the waiting-reason rules are that version's
    # (stepview.engine.records.vllm_versions). Empty from a plug-in older than the field.
    vllm_version: str = ""
    prefill_interval: int = 1  # prefill_schedule_interval: prefills admitted every N steps
    prefills_held: bool = False  # vLLM held prefills in this step for that interval
    # Why the plug-in switched itself off (a vLLM it cannot read): a record with this set is
    # no step, only the word a subscriber gets in place of records (see the plug-in).
    plugin_off: str | None = None
    # The served model's name (vLLM's ``served_model_name``), in full records only: a watch
    # without the server's API (a fleet of plug-in servers) can still say what each one runs.
    model: str = ""
    # vLLM's pause (``PauseState``: 0 none, 1 PAUSED_NEW, 2 PAUSED_ALL): paused, vLLM admits no
    # new request (PAUSED_NEW) or schedules nothing (PAUSED_ALL), whatever the budget and cache.
    paused: int = 0
    # vLLM 0.34 on, with a KV connector: ``max_num_inflight_kv_loads`` (0: no cap), and the
    # requests its scan left at the head of a waiting queue for that cap (a load may start only
    # when one in flight is done): they wait for the cap, not for the KV cache.
    max_kv_loads: int = 0
    kv_load_capped: list[str] = []
    # vLLM 0.34 on: ``cache_aware_admission_window`` (0: off): within the first N waiting
    # requests, those with a cached prefix go first, so the queue is not first come, first served.
    cache_aware_window: int = 0
    # A new subscriber's full record goes in parts when the core holds many requests
    # (stepview.engine.plugin.naming): the first part is ``full``, each part names its share
    # of the requests besides what changed, and this is at most how many of the requests held
    # at the first part are still to be named: 0 in the last part, and in any other record.
    # A reader reads the parts as one full record (RecordStream.take); one older than the
    # field reads the first part as the full record and adopts the rest as they are named.
    to_come: int = 0
    # Append new fields here, each with a default.


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(StepFacts)
_BATCH_DECODER = msgspec.msgpack.Decoder(list[StepFacts])


def encode_facts(facts: StepFacts) -> bytes:
    """The wire form of one record."""
    return _ENCODER.encode(facts)


def encode_facts_into(facts: StepFacts, buffer: bytearray, offset: int) -> None:
    """The wire form of one record written into ``buffer`` from ``offset`` on (resized)."""
    _ENCODER.encode_into(facts, buffer, offset)


def decode_facts(payload: bytes | memoryview) -> StepFacts:
    """One record from its wire form; raises ``msgspec.DecodeError`` on anything else."""
    return _DECODER.decode(payload)


def encode_batch_into(records: list[StepFacts], buffer: bytearray, offset: int) -> None:
    """The wire form of a message: one or more consecutive records, oldest first (a server's
    plug-in sends the records of a few steps at a time; see the publisher)."""
    _ENCODER.encode_into(records, buffer, offset)


def decode_batch(payload: bytes | memoryview) -> list[StepFacts]:
    """The records of one message; raises ``msgspec.DecodeError`` on anything else."""
    return _BATCH_DECODER.decode(payload)


_INTERNAL_ID = re.compile(r"^(?:(\d+)_)?(.+)-[0-9a-f]{8}$")


def split_internal_id(internal_id: str) -> tuple[str, int | None]:
    """Best guess of (client id, sample index) from an engine-core id, for non-vLLM clients.

    vLLM's own client knows the exact mapping (stepview uses that when it drives the engine);
    a client that only sees the wire can only parse: ``"<i>_<id>-<8 hex>"`` is read as sample
    ``i`` of ``id``. A client id that itself looks like ``"<digits>_..."`` is ambiguous, and
    ids from a vLLM run with ``VLLM_DISABLE_REQUEST_ID_RANDOMIZATION`` come back unchanged.
    """
    match = _INTERNAL_ID.match(internal_id)
    if match is None:
        return internal_id, None
    index = match.group(1)
    return match.group(2), None if index is None else int(index)
