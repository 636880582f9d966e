"""What a server's KV-cache events say about its blocks: churn, residency, prefix-cache reuse.

:class:`KvBlockTracker` takes the decoded batches (:mod:`.kv_event_wire`) in order and keeps
running totals (never reset, so that windows over them are plain differences):

* **stored**: full blocks the engine computed and cached — new hashes, and hashes it had
  evicted and now computed again (also counted apart as **recomputed**);
* **removed**: blocks evicted;
* **resident**: blocks cached now, as far as the events seen say (stored - removed since the
  watch began or the cache was last cleared, never below 0; blocks cached before the watch
  began are not known);
* **reused**: blocks a request took from the prefix cache instead of computing them. vLLM
  (0.32) publishes a hit only for requests that ask for ``kv_cache_report_mode: "full"``: it
  re-announces the cached blocks, and a store of a hash already resident counts as reused. For
  the others (the default) the events are inferred from: a request that extends a cached prefix
  stores its first new block with that prefix's last block as parent; when that parent already
  has another child, a second sequence has branched off the prefix, and the prefix's blocks
  (its depth in the chain) count as reused. A request that reuses a prefix no other block
  extends yet, or that stores no block of its own, is not seen.

Bounded memory: the hashes known (resident or evicted) are kept in insertion order up to
:data:`KNOWN_BLOCKS`; beyond it the oldest is forgotten (a hit refreshes a block's place). A
forgotten block's later removal still lowers the resident count (so it stays stored - removed);
its reuse or recomputation then counts as a plain store.

A server that restarts (its sequence numbers go back) or clears its cache (``AllBlocksCleared``)
empties the known blocks and the resident count; the totals go on.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields

from stepview.engine.watch.metrics.kv_event_wire import (
    GPU,
    AllBlocksCleared,
    BlockHash,
    BlockRemoved,
    BlockStored,
    KvBatch,
)

KNOWN_BLOCKS = 65_536
"""Block hashes remembered (about 15 MB at most): a few times a small server's whole cache."""

_Key = BlockHash | tuple[int, BlockHash]


class _Block:
    __slots__ = ("child", "depth", "reported", "resident")

    def __init__(self, depth: int) -> None:
        self.resident = True
        self.depth = depth  # blocks from the start of its sequence, itself included
        self.child: _Key | None = None  # the first block stored with this one as parent
        self.reported = False  # announced as a prefix-cache hit; its next branch is that hit's


@dataclass(frozen=True, slots=True)
class KvTotals:
    """The tracker's running totals (blocks, batches) at one moment."""

    batches: int = 0
    stored: int = 0
    removed: int = 0
    reused: int = 0
    recomputed: int = 0
    resident: int = 0
    clears: int = 0
    restarts: int = 0
    missed: int = 0  # batches lost between sequence numbers (a slow reader, the HWM)
    unknown: int = 0  # events of a type this stepview does not know
    other_tiers: int = 0  # events of offloading tiers (CPU, storage): not counted here


class KvBlockTracker:
    """The GPU KV cache's blocks as one server's events tell them (one caller, in order)."""

    def __init__(self, capacity: int = KNOWN_BLOCKS) -> None:
        self.capacity = capacity
        self._known: OrderedDict[_Key, _Block] = OrderedDict()
        self._last_seq: int | None = None
        self._n = {field.name: 0 for field in fields(KvTotals)}

    @property
    def known(self) -> int:
        return len(self._known)

    def totals(self) -> KvTotals:
        return KvTotals(**self._n)

    def apply(self, batch: KvBatch) -> None:
        n = self._n
        if self._last_seq is not None:
            if batch.seq <= self._last_seq:  # a new publisher: the server restarted
                n["restarts"] += 1
                self._forget()
            else:
                n["missed"] += batch.seq - self._last_seq - 1
        self._last_seq = batch.seq
        n["batches"] += 1
        n["unknown"] += batch.unknown
        for event in batch.events:
            if isinstance(event, AllBlocksCleared):
                n["clears"] += 1
                self._forget()
            elif event.medium not in (None, GPU):
                n["other_tiers"] += 1
            elif isinstance(event, BlockStored):
                self._stored(event)
            elif isinstance(event, BlockRemoved):
                self._removed(event)

    def _forget(self) -> None:
        self._known.clear()
        self._n["resident"] = 0

    def _stored(self, event: BlockStored) -> None:
        n, known = self._n, self._known
        group = event.group_idx or 0
        parent_key = (
            None if event.parent_block_hash is None else _key(group, event.parent_block_hash)
        )
        last_hit: _Block | None = None
        for block_hash in event.block_hashes:
            key = _key(group, block_hash)
            block = known.get(key)
            if block is not None and block.resident:  # announced again: a prefix-cache hit
                n["reused"] += 1
                known.move_to_end(key)
                last_hit = block
                parent_key = key
                continue
            parent = None if parent_key is None else known.get(parent_key)
            if parent is not None and parent.resident:
                if parent.child is None:
                    parent.child = key
                elif parent.child != key:  # a second sequence branches off a cached prefix
                    if parent.reported:
                        parent.reported = False  # the hit announced before, not one more
                    else:
                        n["reused"] += parent.depth
            depth = parent.depth + 1 if parent is not None else 1
            n["stored"] += 1
            n["resident"] += 1
            if block is None:
                known[key] = _Block(depth)
                if len(known) > self.capacity:
                    known.popitem(last=False)
            else:  # evicted before, computed again
                n["recomputed"] += 1
                block.resident, block.depth = True, depth
                known.move_to_end(key)
            parent_key = key
        if last_hit is not None:
            last_hit.reported = True

    def _removed(self, event: BlockRemoved) -> None:
        n, group = self._n, event.group_idx or 0
        for block_hash in event.block_hashes:
            block = self._known.get(_key(group, block_hash))
            n["removed"] += 1
            if block is None:  # forgotten, or cached before the watch began
                n["resident"] = max(0, n["resident"] - 1)
            elif block.resident:
                block.resident = False
                n["resident"] -= 1


def _key(group: int, block_hash: BlockHash) -> _Key:
    """A block's key: its hash alone in the first (usually only) KV cache group."""
    return block_hash if group == 0 else (group, block_hash)
