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
    keep finishing one after another for a while (seeded: every run is the same).

    With ``ramp``, only the first ``ramp`` requests ramp up; every later one asks for exactly
    ``longest`` tokens with ``ignore_eos``: a few finish early, and the rest is a fixed
    amount of work however fast the machine is and wherever the random model says end."""
    span = max(1, (count if ramp is None else ramp) - 1)
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            params: dict[str, object] = {"max_tokens": 8 + (longest - 8) * min(i, span) // span}
            if ramp is not None and i >= ramp:
                params["ignore_eos"] = True
            params["seed"] = i
            out.write(json.dumps({"id": f"r{i}", "prompt": f"story {i} about", "params": params}))
            out.write("\n")
    return path


LONG_RUN = 600
"""Requests in a run a test interrupts mid-way (:func:`write_long_run`)."""


def write_long_run(path: Path) -> Path:
    """A run that is still going however far a busy machine leaves the screen behind the
    engine: 16 requests ramp up and finish one after another early on, and each of the
    other 584 generates 480 tokens whatever the random model says (CI saw a run of 400
    ramped requests end, ~14 s of engine work, before tmux first showed the TUI running)."""
    return write_workload(path, LONG_RUN, ramp=16)
