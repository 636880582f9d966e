"""vLLM's KV-cache events as they travel: decoded without vLLM (``--kv-events tcp://HOST:PORT``).

A vLLM server started with ``--kv-events-config '{"enable_kv_cache_events": true, "publisher":
"zmq", "endpoint": "tcp://*:5557"}'`` publishes, on a zmq PUB socket, one message per engine
step that touched the prefix cache: three frames, ``(topic, seq, payload)``, where ``seq`` is an
8-byte big-endian counter from 0 (a restarted server starts again at 0) and ``payload`` a
msgpack ``KVEventBatch`` (``vllm/distributed/kv_events.py``, vLLM 0.32). The batch is
``array_like`` (``[ts, events, data_parallel_rank]``); its events are *maps* tagged by their
class name in a ``"type"`` field (``{"type": "BlockStored", "block_hashes": [...], ...}``), with
fields at their default left out (``omit_defaults``). The Structs here mirror only the fields
stepview reads; msgspec skips the rest (token ids, LoRA, extra keys). Each event is decoded
apart, so that an event type a newer vLLM adds costs that event, not the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

BlockHash = int | bytes
"""vLLM's ``ExternalBlockHash``: a 64-bit int by default, the digest's bytes with
``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0``."""
GPU = "GPU"
"""The medium of the engine's own KV cache (offloading tiers publish "CPU" or "STORAGE")."""


class BlockStored(msgspec.Struct, tag=True):
    """Full blocks the engine cached (or, for requests that ask for ``kv_cache_report_mode``
    ``"full"``, cached blocks a request found in the prefix cache), in prefix order:
    ``block_hashes[0]``'s parent is ``parent_block_hash``, each next one's the one before."""

    block_hashes: list[BlockHash]
    parent_block_hash: BlockHash | None = None
    block_size: int = 0
    medium: str | None = None
    group_idx: int | None = None


class BlockRemoved(msgspec.Struct, tag=True):
    """Cached blocks evicted (their memory given to new blocks)."""

    block_hashes: list[BlockHash]
    medium: str | None = None
    group_idx: int | None = None


class AllBlocksCleared(msgspec.Struct, tag=True):
    """The whole prefix cache dropped (``reset_prefix_cache``)."""


KvEvent = BlockStored | BlockRemoved | AllBlocksCleared


class _Batch(msgspec.Struct, array_like=True):
    ts: float
    events: list[msgspec.Raw]
    data_parallel_rank: int | None = None


@dataclass(frozen=True, slots=True)
class KvBatch:
    """One published message: its sequence number, the server's wall-clock time, its events
    (those stepview knows) and how many it did not know."""

    seq: int
    ts: float
    events: tuple[KvEvent, ...]
    unknown: int = 0
    rank: int | None = None


_BATCH = msgspec.msgpack.Decoder(_Batch)
_EVENT = msgspec.msgpack.Decoder(KvEvent)


def decode_message(frames: list[bytes]) -> KvBatch:
    """One zmq message (``[topic, seq, payload]``) as a :class:`KvBatch`.

    Raises :class:`ValueError` for a message that is not a KV event batch (wrong frame count,
    a sequence frame not 8 bytes, a payload that is not the batch's shape).
    """
    if len(frames) != 3 or len(frames[1]) != 8:
        raise ValueError(f"not a KV event message: {len(frames)} frames")
    seq = int.from_bytes(frames[1], "big", signed=True)
    try:
        batch = _BATCH.decode(frames[2])
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a KV event batch: {exc}") from None
    events: list[KvEvent] = []
    unknown = 0
    for raw in batch.events:
        try:
            events.append(_EVENT.decode(raw))
        except msgspec.DecodeError:
            unknown += 1  # an event type (or shape) this stepview does not know
    return KvBatch(seq, batch.ts, tuple(events), unknown, batch.data_parallel_rank)
