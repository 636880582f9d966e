"""The fuzz set's Hypothesis profiles, and the bound every parser is held to.

``quick`` (the default: the suite) runs few examples per parser; ``long`` (``STEPVIEW_FUZZ=long``,
as ``python -m benchmarks fuzz`` sets it) runs many, seed after seed. Neither keeps a database
of examples: a bug found is kept as an ``@example`` beside its test, where the suite runs it.
"""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from hypothesis import HealthCheck, settings

QUICK, LONG = "quick", "long"
PROFILE_VARIABLE = "STEPVIEW_FUZZ"
MAX_INPUT = 64 * 1024
"""The largest input generated (bytes or characters): every parser must answer it fast."""
MEMORY_BOUND = 64 * 1024 * 1024
"""The most a parser may allocate at its peak on one input of :data:`MAX_INPUT`: a thousand
times the input, far above a parser's need, far below a loop that grows without end."""

_COMMON = {
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "derandomize": False,
}
settings.register_profile(QUICK, max_examples=25, deadline=timedelta(seconds=5), **_COMMON)
settings.register_profile(LONG, max_examples=2_000, deadline=timedelta(seconds=10), **_COMMON)
settings.load_profile(os.environ.get(PROFILE_VARIABLE, QUICK))

T = TypeVar("T")


def bounded(parse: Callable[[], T], *allowed: type[BaseException]) -> T | None:
    """``parse()``'s value, or ``None`` when it raised one of ``allowed`` (any other
    exception fails the example); its peak memory checked against :data:`MEMORY_BOUND`."""
    tracemalloc.start()
    try:
        return parse()
    except allowed:
        return None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < MEMORY_BOUND, f"{peak} bytes at the peak"
