"""Where an engine core's stacks are written and how they travel: shared by both ends. No vLLM.

The plug-in (:mod:`stepview.engine.plugin.stacks`) writes them inside the engine core; stepview
reads them, from files for its own core (:mod:`stepview.engine.own.core_stacks`), from the
channel for a watched server. Both sides name the same things here.

**Files**, in the plug-in's folder (``STEPVIEW_STACKS_DIR``, which stepview sets for its own
core; a private temporary folder otherwise), per core process ``PID``:

``core-PID.json``
    written once the core's scheduler is built: who the core is (pid, data-parallel rank),
    whether it answers :data:`STACKS_SIGNAL` with its stacks, the thread that runs its steps,
    its threads' names (rewritten when they change). Until it is there, nothing may send the
    core the signal: its default action ends a process.
``core-PID.asked``
    what the signal handler writes, dump after dump (a reader keeps its offset).
``core-PID.watchdog``
    what faulthandler's C watchdog writes when the plug-in's own watch could not run to
    re-arm it (the core holds the GIL in native code).
``core-PID.hung.json``
    the plug-in's watch's latest dump of a step that has not ended for a while (the GIL free),
    with when and the note (:func:`hung_record`), replaced whole each time.

**On the channel** (a watched server), a message is :data:`STACKS_TOPIC` then one
:class:`StacksWire`, msgpack like the records; subscribed to apart from the records, so a watch
that does not know the topic never gets one. A watch asks for the stacks now by subscribing
to :func:`ask_topic` (which matches no message) and unsubscribing: the publisher's XPUB passes
every subscription up, and the answer names the ask.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import msgspec

STACKS_DIR_ENV = "STEPVIEW_STACKS_DIR"
"""The folder the plug-in writes its stacks in; set, the core also answers the signal."""
STACKS_AFTER_ENV = "STEPVIEW_STACKS_AFTER_S"
"""Seconds without a step's end, while the core has requests, before the plug-in writes its
stacks by itself (``0``: never; the signal still works)."""
STACKS_AFTER_S = 10.0
"""Longer than any healthy step of a real model (a long prefill takes a second or two); a
false alarm costs one dump of a few milliseconds, kept for the next recording only."""
STACKS_SIGNAL = signal.SIGUSR2
"""The signal that has a core write its stacks (unused by vLLM's engine core, which takes
SIGTERM and SIGINT; stepview's own SIGUSR1 asks stepview, not the core, for a recording)."""

STACKS_TOPIC = b"stepview.stacks.1"
_ASK = b"?"


def ask_topic(nonce: str) -> bytes:
    """What a watch subscribes to, to ask for the stacks now (matches no message)."""
    return STACKS_TOPIC + _ASK + nonce.encode("ascii")


def asked_nonce(subscription: bytes) -> str | None:
    """The nonce of an ask (a subscription message's topic), ``None`` for any other topic."""
    prefix = STACKS_TOPIC + _ASK
    if not subscription.startswith(prefix):
        return None
    return subscription[len(prefix) :].decode("ascii", "replace")


def ready_file(folder: Path, pid: int) -> Path:
    return folder / f"core-{pid}.json"


def asked_file(folder: Path, pid: int) -> Path:
    return folder / f"core-{pid}.asked"


def watchdog_file(folder: Path, pid: int) -> Path:
    return folder / f"core-{pid}.watchdog"


def hung_file(folder: Path, pid: int) -> Path:
    return folder / f"core-{pid}.hung.json"


def stacks_after() -> float:
    """``STEPVIEW_STACKS_AFTER_S``, or the default; a bad value is the default too."""
    raw = os.environ.get(STACKS_AFTER_ENV, "").strip()
    try:
        value = float(raw) if raw else STACKS_AFTER_S
    except ValueError:
        return STACKS_AFTER_S
    return max(0.0, value)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` whole (a reader never sees half of it)."""
    partial = path.with_name(path.name + ".part")
    partial.write_text(json.dumps(data), encoding="utf-8")
    os.replace(partial, path)


def read_json(path: Path) -> dict[str, Any] | None:
    """A file :func:`write_json` wrote, ``None`` when it is not there (or not readable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def hung_record(taken: float, note: str, text: str) -> dict[str, Any]:
    return {"taken": taken, "note": note, "text": text}


class StacksWire(msgspec.Struct, array_like=True, frozen=True):
    """One core's stacks as a watched server's plug-in sends them (fields as
    :class:`~stepview.model.stacks.CoreStacks`, plus who: pid, rank, and the asks answered).
    Evolves as the records do: fields appended, each with a default."""

    pid: int
    dp_rank: int
    taken: float  # the core's wall clock
    how: str
    text: str
    note: str = ""
    names: dict[int, str] = {}
    step_thread: int = 0
    answers: list[str] = []  # the nonces of the asks this answers (none: sent by itself)
    core_started: float = 0.0


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(StacksWire)


def encode_stacks(stacks: StacksWire) -> bytes:
    """A whole message: the topic, then the stacks."""
    return STACKS_TOPIC + _ENCODER.encode(stacks)


def decode_stacks(message: bytes | memoryview) -> StacksWire:
    """The stacks of a message :func:`encode_stacks` made; ``msgspec.DecodeError`` else."""
    return _DECODER.decode(memoryview(message)[len(STACKS_TOPIC) :])
