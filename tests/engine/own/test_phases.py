"""The loading view's phases come from vLLM's start-up log lines, as each release words them."""

from __future__ import annotations

import logging

import pytest

from stepview.engine.own.phases import PhaseHandler


@pytest.mark.parametrize(
    "line",
    [
        "Starting to load model /m...",  # 0.32's and 0.34's V1 model runners
        "Loading model from scratch...",  # 0.34's V2 and standalone CPU model runners
    ],
)
def test_the_weights_phase_is_named_from_each_releases_line(line: str) -> None:
    seen: list[str] = []
    handler = PhaseHandler(seen.append)
    for message in ("Resolved architecture: LlamaForCausalLM", line, "something else"):
        handler.emit(logging.LogRecord("vllm", logging.INFO, "", 0, message, None, None))
    assert seen == ["reading model config", "loading weights"]
