"""``--replay-speed`` and ``--paused``: parsed with stepview's own flags, before any vLLM."""

from __future__ import annotations

import pytest

from stepview.cli.args import parse_own_args


def test_speed_and_paused_are_read_and_default_to_normal_playback() -> None:
    own, rest = parse_own_args(["--replay", "t.jsonl", "--replay-speed", "0.5", "--paused"])
    assert (own.replay_speed, own.paused, rest) == (0.5, True, [])
    own, _ = parse_own_args(["--replay", "t.jsonl"])
    assert (own.replay_speed, own.paused) == (1.0, False)


@pytest.mark.parametrize("speed", ["0", "-2", "nan", "inf", "fast"])
def test_a_speed_that_is_not_above_zero_is_a_usage_error(
    speed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_own_args(["--replay", "t.jsonl", "--replay-speed", speed])
    assert exit_info.value.code == 2
    assert "--replay-speed: must be a number above 0" in capsys.readouterr().err
