"""``--kv-events``: vLLM's KV-cache events decoded and counted without vLLM.

The bytes are real: captured from vLLM 0.32's API server on the demo model, started with
``--kv-events-config '{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint":
"tcp://*:PORT", "topic": "kv"}'`` (each message as zmq delivered it: topic, seq, payload).

* ``kv_events_prefix``: block size 128; three completions of one 219-token prefix, the third
  asking ``kv_cache_report_mode: "full"``; the server's /metrics then said 256 prefix-cache hit
  tokens (two blocks).
* ``kv_events_evict``: block size 32, a 4096-token cache; 14 distinct prompts (evictions from
  the 11th), ``/reset_prefix_cache``, then one more request (the clear travels with its batch).
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest
import zmq

from stepview.engine.watch.metrics.kv_blocks import KvBlockTracker, KvTotals
from stepview.engine.watch.metrics.kv_event_wire import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KvBatch,
    decode_message,
)
from stepview.engine.watch.metrics.kv_events_watch import KvEventsWatch, kv_record
from stepview.model.address import zmq_endpoint

DATA = Path(__file__).parents[2] / "data"


def captured(name: str) -> list[list[bytes]]:
    frames: list[list[bytes]] = msgspec.msgpack.decode(
        (DATA / f"kv_events_{name}.msgpack").read_bytes()
    )
    return frames


def batches(name: str) -> list[KvBatch]:
    return [decode_message(frames) for frames in captured(name)]


def tracked(*runs: list[KvBatch], capacity: int = 65_536) -> KvBlockTracker:
    tracker = KvBlockTracker(capacity)
    for run in runs:
        for batch in run:
            tracker.apply(batch)
    return tracker


def test_real_batches_decode_to_vllms_events() -> None:
    frames = captured("prefix")
    assert {topic for topic, _, _ in frames} == {b"kv"}
    prefix = batches("prefix")
    assert [batch.seq for batch in prefix] == [0, 1, 2, 3, 4]
    assert all(batch.rank == 0 and batch.unknown == 0 and batch.ts > 1.7e9 for batch in prefix)
    first, king, queen = (batch.events[0] for batch in prefix[:3])
    assert isinstance(first, BlockStored) and first.parent_block_hash is None
    assert first.block_size == 128 and first.medium == "GPU" and first.group_idx == 0
    assert isinstance(first.block_hashes[0], int)
    assert isinstance(king, BlockStored) and isinstance(queen, BlockStored)
    assert king.parent_block_hash == queen.parent_block_hash == first.block_hashes[0]
    assert prefix[3].events[0] == first  # the "full" report re-announces the cached block

    evict = batches("evict")
    kinds = [type(event) for batch in evict for event in batch.events]
    assert kinds.count(BlockRemoved) == 51 and kinds.count(AllBlocksCleared) == 1
    assert isinstance(evict[-1].events[0], AllBlocksCleared)
    assert isinstance(evict[-1].events[1], BlockStored)


def test_an_unknown_event_costs_itself_and_a_foreign_message_is_refused() -> None:
    payload = msgspec.msgpack.encode(
        [1.0, [{"type": "BlockPinned", "block_hashes": [1]}, {"type": "AllBlocksCleared"}], None]
    )
    batch = decode_message([b"", (7).to_bytes(8, "big"), payload])
    assert batch.seq == 7 and batch.unknown == 1 and batch.events == (AllBlocksCleared(),)
    with pytest.raises(ValueError, match="frames"):
        decode_message([b"kv", payload])
    with pytest.raises(ValueError, match="batch"):
        decode_message([b"kv", (0).to_bytes(8, "big"), b"\x01\x02"])


def test_prefix_reuse_matches_the_servers_hits() -> None:
    """Two blocks reused, as /metrics counted (256 tokens): the queen's branch off the cached
    prefix (inferred), the frog's reported hit (and its branch not counted twice)."""
    totals = tracked(batches("prefix")).totals()
    assert (totals.stored, totals.reused, totals.resident, totals.removed) == (4, 2, 4, 0)
    assert totals.missed == totals.restarts == totals.recomputed == 0
    # Without the frog's report, the branch alone still counts the block.
    assert tracked(batches("prefix")[:3]).totals().reused == 1


def test_evictions_and_a_clear() -> None:
    evict = batches("evict")
    before = tracked(evict[:-1]).totals()
    assert (before.stored, before.removed, before.reused) == (177, 51, 0)
    assert before.resident == 177 - 51 == 126  # the cache's 128 blocks, less the null block
    after = tracked(evict).totals()
    assert after.clears == 1 and after.resident == 5 and after.stored == 182


def test_a_restarted_server_starts_the_residents_again() -> None:
    prefix = batches("prefix")
    twice = tracked(prefix, prefix).totals()
    assert twice.restarts == 1 and twice.resident == 4 and twice.batches == 10
    assert twice.stored == 8 and twice.reused == 4  # the totals go on


def test_a_gap_in_the_sequence_is_counted_as_missed() -> None:
    prefix = batches("prefix")
    assert tracked([prefix[0], prefix[3], prefix[4]]).totals().missed == 2


def test_known_blocks_are_bounded_and_a_forgotten_removal_still_counts() -> None:
    evict = batches("evict")
    tracker = tracked(evict[:-1], capacity=20)
    assert tracker.known == 20
    totals = tracker.totals()
    assert (totals.stored, totals.removed, totals.resident) == (177, 51, 126)


def test_a_block_stored_again_after_its_eviction_is_recomputed() -> None:
    evict = batches("evict")
    first = evict[0].events[0]
    assert isinstance(first, BlockStored)
    gone = KvBatch(100, 0.0, (BlockRemoved(first.block_hashes[:1], "GPU"),))
    again = KvBatch(101, 0.0, (BlockStored(first.block_hashes[:1], None, 32, "GPU"),))
    totals = tracked(evict[:1], [gone, again]).totals()
    assert (totals.recomputed, totals.reused, totals.resident, totals.missed) == (1, 0, 12, 99)


def test_other_tiers_are_left_out() -> None:
    cpu = KvBatch(0, 0.0, (BlockStored([1, 2], None, 16, "CPU"),))
    totals = tracked([cpu]).totals()
    assert totals.other_tiers == 1 and totals.stored == totals.resident == 0


def test_churn_over_the_window() -> None:
    watch = KvEventsWatch(zmq_endpoint("tcp://127.0.0.1:1"), window=10.0)
    assert watch.figures(0.0, KvTotals()).stored_per_s == 0.0
    half = watch.figures(5.0, KvTotals(batches=3, stored=50, removed=5, resident=45))
    assert half.stored_per_s == 10.0 and half.removed_per_s == 1.0  # 50 in the 5 s watched
    full = watch.figures(10.0, KvTotals(batches=6, stored=100, reused=30, resident=90))
    assert (full.stored_per_s, full.stored, full.reused) == (10.0, 100, 30)
    assert full.reuse_share == 30 / 130
    later = watch.figures(16.0, KvTotals(batches=6, stored=100, reused=30, resident=90))
    assert later.stored == 50 and later.stored_per_s == 5.0  # the first 5 s left the window
    quiet = watch.figures(30.0, KvTotals(batches=6, stored=100, reused=30, resident=90))
    assert (quiet.stored, quiet.reused, quiet.reuse_share) == (0, 0, None)
    assert quiet.resident == 90
    record = kv_record(quiet)
    assert record["resident"] == 90 and record["reuse_share"] is None
    assert record["address"] == "tcp://127.0.0.1:1"


def test_the_subscriber_reads_a_publisher(tmp_path: Path) -> None:
    """The captured messages published again on a real zmq PUB socket, as vLLM sends them."""
    address = f"ipc://{tmp_path}/kv"
    publisher = zmq.Context.instance().socket(zmq.PUB)
    publisher.bind(address)
    watch = KvEventsWatch(zmq_endpoint(address), window=60.0)
    try:
        figures = watch.poll(0.0)
        assert figures.batches == 0
        deadline = time.monotonic() + 10
        while not watch.poll(0.1).connected:  # zmq's monitor says when the link is up
            assert time.monotonic() < deadline, "never connected"
            time.sleep(0.01)
        while not watch.poll(0.5).problem:  # zmq's slow joiner: probe until one is heard
            assert time.monotonic() < deadline, "the subscriber never heard the publisher"
            publisher.send_multipart([b"probe"])
            time.sleep(0.01)
        assert "not a KV event message" in watch.poll(0.5).problem
        for message in captured("prefix"):
            publisher.send_multipart(message)
        while watch.tracker.totals().batches < 5:
            assert time.monotonic() < deadline
            figures = watch.poll(1.0)
            time.sleep(0.01)
        assert (figures.stored, figures.reused, figures.resident) == (4, 2, 4)
        publisher.close(linger=0)
        while watch.poll(2.0).connected:  # the publisher gone: the link is down
            assert time.monotonic() < deadline + 10, "never saw the publisher go"
            time.sleep(0.01)
    finally:
        watch.close()
        publisher.close(linger=0)
