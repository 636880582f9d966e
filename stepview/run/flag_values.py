"""The value types of stepview's flags: whole numbers, ports, sizes (``100M``), durations
(``10m``), each refused with a message naming the flag, as argparse does for a ``type=``.

Kept below the command line because two places declare flags with them: the command line's
own groups (:mod:`stepview.cli`) and the output registry's entries (:mod:`stepview.outputs`),
which the command line reads its output flags from.
"""

from __future__ import annotations

import argparse
import math
import re

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([kmg]?)b?\s*", re.IGNORECASE)
_SECONDS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?)\s*(s|sec|m|min|h|d)?\s*", re.IGNORECASE)


def whole_number(text: str) -> int:
    """A whole number of at least 0 (a negative ``--admit-per-step`` would admit nothing)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 (the system picks a free one) to 65535."""
    value = whole_number(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535, got {value}")
    return value


def size(text: str) -> int:
    """Bytes: ``500000``, ``64K``, ``100M``, ``2G`` (binary units, a trailing ``B`` allowed)."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"must be a size such as 100M or 2G, got {text!r}")
    value = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if value < 1 << 16:
        raise argparse.ArgumentTypeError(f"must be 64K or more, got {text!r}")
    return value


def duration(text: str) -> float:
    """Seconds: ``90``, ``90s``, ``10m``, ``2h``, ``1d``; more than 0."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"must be a duration such as 90s, 10m or 2h, got {text!r}")
    value = float(match.group(1)) * _SECONDS[(match.group(2) or "").lower()]
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text!r}")
    return value
