"""The cached option names and the flags a user gave, read from a parser built like vLLM 0.33's.

vLLM 0.33's ``EnableDisableAction`` pairs ``--enable-X`` with ``--disable-X`` and keeps the
older ``--no-enable-X`` / ``--no-disable-X`` forms accepted but out of the help, by leaving them
out of the action's ``option_strings`` after the parser registered them. No vLLM needed: the
parser below does the same thing with argparse alone.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from stepview.engine.own.engine_args import (
    UsageError,
    _given,
    check_option_names,
    remember_option_names,
)


class _EnableDisable(argparse.BooleanOptionalAction):
    """vLLM 0.33's ``EnableDisableAction``, cut down: the value from the form used."""

    def __call__(
        self, parser: object, namespace: object, values: object, option: object = None
    ) -> None:
        negative = str(option).startswith(("--no-", "--disable-"))
        setattr(namespace, self.dest, not negative)


def _parser_like_vllm_033() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-num-seqs", type=int)
    action = parser.add_argument("--enable-prefix-caching", action=_EnableDisable)
    parser._option_string_actions["--disable-prefix-caching"] = action
    parser._option_string_actions["--no-disable-prefix-caching"] = action
    # What vLLM 0.33's _register_action does: the parser keeps every form, the action
    # shows only the visible ones.
    action.option_strings = ["--enable-prefix-caching", "--disable-prefix-caching"]
    return parser


def test_hidden_negative_forms_are_known_and_count_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = _parser_like_vllm_033()
    assert parser.parse_args(["--no-enable-prefix-caching"]).enable_prefix_caching is False
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    remember_option_names(parser)
    check_option_names(["--no-enable-prefix-caching", "--no-disable-prefix-caching"])
    check_option_names(["--disable-prefix-caching", "--max_num_seqs=2"])
    with pytest.raises(UsageError, match="unknown option --no-enable-prefix-cachin9"):
        check_option_names(["--no-enable-prefix-cachin9"])
    # A built-in model's default must not override what the user said with a hidden form.
    assert _given(parser, ["--no-enable-prefix-caching"]) == {"enable_prefix_caching"}
    assert _given(parser, ["--max-num-seqs", "2"]) == {"max_num_seqs"}
